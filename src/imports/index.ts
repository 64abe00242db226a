import { Elysia, t } from 'elysia';
import { REASONS } from './rejections';
import type { Deps } from '../deps';
import { ApiError } from '../errors';
import { authOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { assertBodyShape } from '../http/body-shape';
import { rejectRepeatedParams, rejectUnknownParams } from '../http/pagination';
import { cancelContactImport } from './cancel';
import {
  CancelImportBody,
  ContactImport,
  CreatedImport,
  CreateImportBody,
  ImportIdParams,
  ImportListQuery,
  ImportPage,
} from './model';
import { rejectedRowsResponse } from './rejected-rows';
import { createImport, getImport, listImports } from './service';

const CREATE_FIELDS = [
  'columns',
  'duplicateContactStrategy',
  'brandIds',
  'overwriteBrands',
  'restoreDisabled',
  'publishBrandSubscribeEvents',
];

const REASON_TABLE = (Object.entries(REASONS) as [string, { counter: string; means: string }][])
  .map(
    ([code, r]) =>
      `- \`${code}\` (${r.counter === 'duplicateInFile' ? 'duplicateInFileCount' : `${r.counter}Count`}): ${r.means}`,
  )
  .join('\n');

/** The report's body, for the API reference: CSV text, not JSON. */
const RejectedRowsCsv = t.String({
  description: "The report, `text/csv; charset=utf-8`: `row,reason,column,detail,` then the file's own columns.",
});

export function importRoutes(deps: Deps) {
  const { sql } = deps;
  const { publicUrl } = deps.config;
  return new Elysia({ prefix: '/v1/contact-imports', detail: { tags: ['Contact imports'] } })
    .get(
      '',
      ({ request, query }) => {
        rejectRepeatedParams(request.url);
        rejectUnknownParams(query, ['page', 'pageSize']);
        return listImports(sql, publicUrl, authOf(request).accountId, query);
      },
      {
        query: ImportListQuery,
        response: { 200: ImportPage, ...errorResponses(400) },
        detail: { summary: 'List contact imports, newest first' },
      },
    )
    .post(
      '',
      async ({ request, body, set }) => {
        if (!deps.storage) throw new ApiError('api_error', 'No object store is configured.');
        set.status = 201;
        return createImport(sql, deps.storage, authOf(request).accountId, body);
      },
      {
        body: CreateImportBody,
        // Elysia's normaliser drops unknown fields silently; a typo must be a 400 instead.
        transform: ({ body }) => assertBodyShape(body, { allowed: CREATE_FIELDS, objects: [] }),
        response: { 201: CreatedImport, ...errorResponses(400, 409) },
        detail: { summary: 'Create a contact import and get its upload link' },
      },
    )
    .get('/:importId', ({ request, params }) => getImport(sql, publicUrl, authOf(request).accountId, params.importId), {
      params: ImportIdParams,
      response: { 200: ContactImport, ...errorResponses(400, 404) },
      detail: { summary: 'Get a contact import' },
    })
    .get(
      '/:importId/rejected-rows',
      ({ request, params }) => rejectedRowsResponse(sql, deps.storage, authOf(request).accountId, params.importId),
      {
        params: ImportIdParams,
        response: errorResponses(400, 404),
        detail: {
          responses: {
            200: { description: 'The report', content: { 'text/csv': { schema: RejectedRowsCsv } } },
          } as never,
          summary: "Download the rows of a finished import's file that were not added or updated",
          description:
            'An extension beyond the contract. A CSV file (RFC 4180, UTF-8) with one line for every data row of ' +
            'the file that did not become an added or updated contact, in file order, after a header line. Its ' +
            'columns: `row` (the data row number, 1 = the first row after the header), `reason` (a stable code), ' +
            "`column` (the column at fault, when there is one), `detail` (human-readable), then the row's own " +
            "cells exactly as the file had them. Per reason code, the lines add up to the import's counts:\n\n" +
            REASON_TABLE +
            '\n\nThere is a report once the import is `success` and rejected at least one row; the import then has ' +
            '`rejectedRowsUrl`. 404 `not_found_error` before that, for an import without rejected rows, and once ' +
            'the report is past its retention (REJECTED_ROWS_RETENTION_DAYS, 30 days by default).',
        },
      },
    )
    .post(
      '/:importId/cancel',
      ({ request, params }) =>
        cancelContactImport(sql, deps.storage, publicUrl, authOf(request).accountId, params.importId),
      {
        // No body; like a contact's disable, a field sent is a 400 rather than silently ignored.
        transform: ({ body }) => assertBodyShape(body, { allowed: [], objects: [] }, true),
        params: ImportIdParams,
        body: CancelImportBody,
        response: { 200: ContactImport, ...errorResponses(400, 404, 409) },
        detail: {
          summary: 'Cancel a contact import that has not started',
          description:
            'An extension beyond the contract. Moves an import that is `awaiting-upload` or `uploaded` to `failed` ' +
            'with `failureReason` "The import was cancelled.", so the account may create its next import at once; ' +
            'an uploaded file is deleted and a file sent to its upload link later is never imported (the embedded ' +
            "store's link refuses it with 403 AccessDenied). Takes no body (an empty JSON object is accepted). " +
            'Idempotent: cancelling a cancelled import returns it again. 409 `conflict_error` when the import is ' +
            '`importing`, has succeeded, or failed for another reason.',
        },
      },
    );
}

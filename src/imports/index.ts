import { Elysia } from 'elysia';
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
import { createImport, getImport, listImports } from './service';

const CREATE_FIELDS = [
  'columns',
  'duplicateContactStrategy',
  'brandIds',
  'overwriteBrands',
  'restoreDisabled',
  'publishBrandSubscribeEvents',
];

export function importRoutes(deps: Deps) {
  const { sql } = deps;
  return new Elysia({ prefix: '/v1/contact-imports', detail: { tags: ['Contact imports'] } })
    .get(
      '',
      ({ request, query }) => {
        rejectRepeatedParams(request.url);
        rejectUnknownParams(query, ['page', 'pageSize']);
        return listImports(sql, authOf(request).accountId, query);
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
    .get('/:importId', ({ request, params }) => getImport(sql, authOf(request).accountId, params.importId), {
      params: ImportIdParams,
      response: { 200: ContactImport, ...errorResponses(400, 404) },
      detail: { summary: 'Get a contact import' },
    })
    .post(
      '/:importId/cancel',
      ({ request, params }) => cancelContactImport(sql, deps.storage, authOf(request).accountId, params.importId),
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

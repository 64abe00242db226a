import { Elysia } from 'elysia';
import type { Deps } from '../deps';
import { authOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { rejectRepeatedParams, rejectUnknownParams } from '../http/pagination';
import { assertBodyShape } from '../http/body-shape';
import { addRecords } from './add-records';
import { getImport, listImports } from './imports';
import { findList, listLists, toList } from './lists';
import {
  AddRecordsBody,
  AddRecordsResult,
  ImportIdParams,
  ImportListQuery,
  ListIdParams,
  SuppressionImport,
  SuppressionImportPage,
  SuppressionList,
  SuppressionListPage,
  SuppressionListQuery,
} from './model';

export function suppressionListRoutes(deps: Deps) {
  const { sql } = deps;
  return new Elysia({ prefix: '/v1/suppression-lists', detail: { tags: ['Suppression lists'] } })
    .get(
      '',
      ({ request, query }) => {
        rejectRepeatedParams(request.url);
        rejectUnknownParams(query, ['page', 'pageSize', 'sort']);
        return listLists(sql, authOf(request).accountId, query);
      },
      {
        query: SuppressionListQuery,
        response: { 200: SuppressionListPage, ...errorResponses(400) },
        detail: { summary: 'List suppression lists' },
      },
    )
    .get(
      '/:suppressionListId',
      async ({ request, params }) => toList(await findList(sql, authOf(request).accountId, params.suppressionListId)),
      {
        params: ListIdParams,
        response: { 200: SuppressionList, ...errorResponses(400, 404) },
        detail: { summary: 'Get a suppression list' },
      },
    )
    .post(
      '/:suppressionListId/records',
      ({ request, params, body }) => addRecords(sql, authOf(request).accountId, params.suppressionListId, body.records),
      {
        params: ListIdParams,
        body: AddRecordsBody,
        // Elysia's normaliser drops unknown fields silently; a typo must be a 400 instead.
        transform: ({ body }) => assertBodyShape(body, { allowed: ['records'], objects: [] }),
        response: { 200: AddRecordsResult, ...errorResponses(400, 404, 409) },
        detail: {
          summary: 'Add records',
          description:
            "Adds up to 1000 records, all or nothing, as one import in the list's history. " +
            '409 operation_in_progress (with Retry-After) while another import of the list runs.',
        },
      },
    )
    .get(
      '/:suppressionListId/imports',
      ({ request, params, query }) => {
        rejectRepeatedParams(request.url);
        rejectUnknownParams(query, ['page', 'pageSize']);
        return listImports(sql, authOf(request).accountId, params.suppressionListId, query);
      },
      {
        params: ListIdParams,
        query: ImportListQuery,
        response: { 200: SuppressionImportPage, ...errorResponses(400, 404) },
        detail: {
          summary: "List a list's imports",
          description: 'Add-records requests and manual uploads, newest first.',
        },
      },
    )
    .get(
      '/:suppressionListId/imports/:importId',
      ({ request, params }) => getImport(sql, authOf(request).accountId, params.suppressionListId, params.importId),
      {
        params: ImportIdParams,
        response: { 200: SuppressionImport, ...errorResponses(400, 404) },
        detail: { summary: 'Get a list import' },
      },
    );
}

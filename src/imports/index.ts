import { Elysia } from 'elysia';
import type { Deps } from '../deps';
import { ApiError } from '../errors';
import { authOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { assertBodyShape } from '../http/body-shape';
import { rejectRepeatedParams, rejectUnknownParams } from '../http/pagination';
import { ContactImport, CreatedImport, CreateImportBody, ImportIdParams, ImportListQuery, ImportPage } from './model';
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
    });
}

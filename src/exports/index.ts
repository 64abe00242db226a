import { Elysia, t } from 'elysia';
import type { Deps } from '../deps';
import { authOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { assertBodyShape } from '../http/body-shape';
import { rejectRepeatedParams, rejectUnknownParams } from '../http/pagination';
import { DownloadLinks } from './download';
import { downloadResponse } from './download-route';
import {
  ContactExport,
  ContactExportPage,
  CREATE_FIELDS,
  CreateExportBody,
  ExportIdParams,
  ExportListQuery,
  MAX_FILTER_BRANDS,
} from './model';
import { createExport, getExport, listExports, readExportFilter } from './service';

const EXTENSION = 'An extension beyond the contract. ';

export function contactExportRoutes(deps: Deps) {
  const { sql } = deps;
  const links = new DownloadLinks(deps.config, deps.storage);
  const api = new Elysia({ prefix: '/v1/contact-exports', detail: { tags: ['Contact exports'] } })
    .get(
      '',
      async ({ request, query }) => {
        rejectRepeatedParams(request.url);
        rejectUnknownParams(query, ['page', 'pageSize']);
        return listExports(sql, links, authOf(request).accountId, query);
      },
      {
        query: ExportListQuery,
        response: { 200: ContactExportPage, ...errorResponses(400) },
        detail: {
          summary: 'List contact exports, newest first',
          description: EXTENSION + 'Needs the scope `contacts:read`. Each finished one carries a fresh download link.',
        },
      },
    )
    .post(
      '',
      async ({ request, body, set }) => {
        const created = await createExport(sql, links, authOf(request).accountId, body ?? {});
        set.status = 202;
        return created;
      },
      {
        body: t.Optional(CreateExportBody),
        // Elysia's normaliser drops unknown fields silently; a typo must be a 400 instead.
        transform: ({ body }) => {
          assertBodyShape(body, { allowed: CREATE_FIELDS, objects: ['filter'] }, true);
          readExportFilter((body as { filter?: unknown } | undefined)?.filter);
        },
        response: { 202: ContactExport, ...errorResponses(400, 409) },
        detail: {
          summary: 'Export contacts to a CSV file',
          description:
            EXTENSION +
            'Needs the scope `contacts:read`. Queues an export of the contacts matching `filter` (every field ' +
            'optional) to one UTF-8 CSV file, gzip-compressed if asked; GET the export until `status` is ' +
            '`success`, then fetch `downloadUrl`. The file is one consistent snapshot of the account as the ' +
            'export starts: a header row of the columns as the schema names them, then one row per contact, ' +
            'each value as an import reads it (lists and Brand ids joined with `;`, a literal `;` written ' +
            '`\\;`; an absent value an empty cell), so it imports back. 400 `invalid_request_error` with ' +
            'pointer `/columns/<index>` for an unknown or repeated column, `/columns` without Email, ' +
            `\`/filter/brandIds\` for a brand id that is not the account's (at most ${MAX_FILTER_BRANDS}), ` +
            'the search’s own pointers under `/filter` for a filter of the search language, ' +
            '`/compression` for another value than none or gzip. One export of an account runs at a time: ' +
            'another while one is queued or exporting is 409 `operation_in_progress` with `Retry-After`.',
        },
      },
    )
    .get('/:id', ({ request, params }) => getExport(sql, links, authOf(request).accountId, params.id), {
      params: ExportIdParams,
      response: { 200: ContactExport, ...errorResponses(400, 404) },
      detail: {
        summary: 'Get a contact export',
        description:
          EXTENSION +
          'Needs the scope `contacts:read`. On success, while the file is kept (EXPORT_RETENTION_DAYS), ' +
          '`downloadUrl` is a link made for this read, valid one hour (`downloadExpiresAt`). 404 ' +
          "`not_found_error` for an id that is not one of the account's exports.",
      },
    });
  // The local store's download link, `/downloads/<token>`; no Authorization header, the token is the credential.
  const download = new Elysia().get('/downloads/:token', ({ params }) => downloadResponse(deps, links, params.token), {
    detail: { hide: true },
  });
  return new Elysia().use(api).use(download);
}

import { Elysia } from 'elysia';
import type { Deps } from '../deps';
import { authOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { rejectUnknownParams } from '../http/pagination';
import { findList, listLists, toList } from './lists';
import { ListIdParams, SuppressionList, SuppressionListPage, SuppressionListQuery } from './model';

export function suppressionListRoutes(deps: Deps) {
  const { sql } = deps;
  return new Elysia({ prefix: '/v1/suppression-lists', detail: { tags: ['Suppression lists'] } })
    .get(
      '/',
      ({ request, query }) => {
        rejectUnknownParams(query, ['page', 'pageSize', 'sort']);
        return listLists(sql, authOf(request).accountId, query);
      },
      { query: SuppressionListQuery, response: { 200: SuppressionListPage, ...errorResponses(400) }, detail: { summary: 'List suppression lists' } },
    )
    .get('/:suppressionListId', async ({ request, params }) => toList(await findList(sql, authOf(request).accountId, params.suppressionListId)), {
      params: ListIdParams,
      response: { 200: SuppressionList, ...errorResponses(400, 404) },
      detail: { summary: 'Get a suppression list' },
    });
}

import { Elysia } from 'elysia';
import type { Deps } from '../deps';
import { authOf } from '../http/context';
import { rejectRepeatedParams, rejectUnknownParams } from '../http/pagination';
import { errorResponses } from '../http/openapi';
import { Brand, BrandIdParams, BrandList, BrandListQuery } from './model';
import { getBrand, listBrands, nameFilterOf } from './service';

export function brandRoutes({ sql }: Deps) {
  return new Elysia({ prefix: '/v1/brands', detail: { tags: ['Brands'] } })
    .get(
      '',
      ({ request, query }) => {
        rejectRepeatedParams(request.url);
        rejectUnknownParams(
          query,
          ['page', 'pageSize', 'sort', 'enabled'],
          (k) => k === 'name' || k.startsWith('name['),
        );
        return listBrands(sql, authOf(request).accountId, query, nameFilterOf(query));
      },
      {
        query: BrandListQuery,
        response: { 200: BrandList, ...errorResponses(400) },
        detail: { summary: 'List brands' },
      },
    )
    .get('/:brandId', ({ request, params }) => getBrand(sql, authOf(request).accountId, params.brandId), {
      params: BrandIdParams,
      response: { 200: Brand, ...errorResponses(400, 404) },
      detail: { summary: 'Get brand' },
    });
}

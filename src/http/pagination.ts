import { t, type TSchema } from 'elysia';
import { invalidParameter } from '../errors';

/** page/pageSize of every list endpoint, with the spec's bounds and defaults. */
export const pageParams = {
  page: t.Optional(t.Integer({ minimum: 1, default: undefined, error: 'page must be an integer of at least 1.' })),
  pageSize: t.Optional(t.Integer({ minimum: 10, maximum: 200, error: 'pageSize must be an integer from 10 to 200.' })),
};

export const Pagination = t.Object({
  page: t.Integer(),
  pageSize: t.Integer(),
  totalCount: t.Integer({ description: 'Matching items across all pages.' }),
  totalPages: t.Integer({ description: 'ceil(totalCount / pageSize); 0 when nothing matches.' }),
});

export const listOf = <T extends TSchema>(item: T) => t.Object({ data: t.Array(item), pagination: Pagination });

export interface Page {
  page: number;
  pageSize: number;
  offset: number;
}

export function pageOf(query: { page?: number; pageSize?: number }): Page {
  const page = query.page ?? 1;
  const pageSize = query.pageSize ?? 200;
  return { page, pageSize, offset: (page - 1) * pageSize };
}

export function pagination(p: Page, totalCount: number) {
  return { page: p.page, pageSize: p.pageSize, totalCount, totalPages: Math.ceil(totalCount / p.pageSize) };
}

/** Unknown query parameters are an error rather than silently ignored (a typo would change results). */
export function rejectUnknownParams(query: Record<string, unknown>, allowed: readonly string[], isAllowed?: (key: string) => boolean): void {
  for (const key of Object.keys(query)) {
    if (!allowed.includes(key) && !isAllowed?.(key)) throw invalidParameter(key, `Unknown query parameter ${key}.`);
  }
}

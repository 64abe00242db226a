import { t, type TSchema } from 'elysia';
import { invalidParameter } from '../errors';

/**
 * Names the query parameter on its own schema. Elysia checks a coerced number (page=0) outside the
 * query object and reports it with an empty path, so the error mapper reads the name from here.
 */
export const PARAMETER = 'x-parameter';

/**
 * A query integer: plain decimal digits only. Elysia coerces a numeric query value with Number(),
 * which reads `0x10` as 16, `1e1` as 10 and ` 1`, `+1` or `1.0` as 1; the raw text is checked
 * against digits instead and decoded here, with the bounds, so each fault names its parameter.
 */
export function queryInteger(name: string, minimum: number, maximum: number, error: string, description: string) {
  return t.Optional(
    t
      .Transform(t.String({ pattern: '^[0-9]+$', error, description, [PARAMETER]: name }))
      .Decode((text) => {
        const value = Number(text);
        if (!(value >= minimum && value <= maximum)) throw invalidParameter(name, error);
        return value;
      })
      .Encode((value) => String(value)),
  );
}

/** page/pageSize of every list endpoint, with the spec's bounds and defaults. */
export const pageParams = {
  // The upper bound keeps page exact in a JS number and the SQL offset within bigint (a page like 1e20
  // used to reach PostgreSQL as "2e+22" and fail as a 500).
  page: queryInteger(
    'page',
    1,
    Number.MAX_SAFE_INTEGER,
    'page must be an integer of at least 1 (and below 2^53), in decimal digits.',
    'Default 1.',
  ),
  pageSize: queryInteger(
    'pageSize',
    10,
    200,
    'pageSize must be an integer from 10 to 200, in decimal digits.',
    'Default 200.',
  ),
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

/**
 * A query parameter given twice is an error: Elysia keeps only the last value of a non-array
 * parameter, which would silently drop a filter (`name=a&name=b`).
 */
export function rejectRepeatedParams(url: string): void {
  const seen = new Set<string>();
  for (const key of new URL(url).searchParams.keys()) {
    if (seen.has(key)) throw invalidParameter(key, `The query parameter ${key} may be given only once.`);
    seen.add(key);
  }
}

/** Unknown query parameters are an error rather than silently ignored (a typo would change results). */
export function rejectUnknownParams(
  query: Record<string, unknown>,
  allowed: readonly string[],
  isAllowed?: (key: string) => boolean,
): void {
  for (const key of Object.keys(query)) {
    if (!allowed.includes(key) && !isAllowed?.(key)) throw invalidParameter(key, `Unknown query parameter ${key}.`);
  }
}

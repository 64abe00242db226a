import type { Sql } from '../db';
import { invalidParameter, notFound } from '../errors';
import { pageOf, pagination } from '../http/pagination';
import { NAME_OPERATORS, type NameOperator } from './model';

export interface BrandRow {
  id: string;
  name: string;
  enabled: boolean;
  from_address: string | null;
  domain: string | null;
  esps: { id: string; name: string }[];
  verticals: { id: number; label: string }[];
  unsubscribe_page_id: string | null;
  use_list_unsubscribe_header: boolean;
  created_at: Date;
}

export function toBrand(row: BrandRow) {
  return {
    id: row.id,
    name: row.name,
    enabled: row.enabled,
    ...(row.from_address !== null && { fromAddress: row.from_address }),
    ...(row.domain !== null && { domain: row.domain }),
    esps: row.esps,
    verticals: row.verticals,
    unsubscribeHandling: {
      type: 'Hosted' as const,
      useListUnsubscribeHeader: row.use_list_unsubscribe_header,
      ...(row.unsubscribe_page_id !== null && { unsubscribePageId: row.unsubscribe_page_id }),
    },
    createdAt: row.created_at.toISOString(),
  };
}

export async function getBrand(sql: Sql, accountId: string, brandId: string) {
  const [row] = await sql<BrandRow[]>`
    select * from brands where account_id = ${accountId} and id = ${brandId} and deleted_at is null`;
  if (!row) throw notFound(`No brand ${brandId} in this account.`);
  return toBrand(row);
}

export interface NameFilter {
  op: NameOperator;
  value: string;
}

/** At most one of `name` / `name[op]`; an unknown operator is a 400 naming the parameter. */
export function nameFilterOf(query: Record<string, unknown>): NameFilter | undefined {
  const filters: NameFilter[] = [];
  for (const [key, value] of Object.entries(query)) {
    if (key !== 'name' && !key.startsWith('name[')) continue;
    const op = key === 'name' ? 'equal' : key.slice(5, -1);
    if (!key.endsWith(']') && key !== 'name')
      throw invalidParameter(key, `Malformed name filter ${key}; use name[operator].`);
    if (!(NAME_OPERATORS as readonly string[]).includes(op)) {
      throw invalidParameter(key, `Unknown name filter operator "${op}". Use one of ${NAME_OPERATORS.join(', ')}.`);
    }
    if (typeof value !== 'string') throw invalidParameter(key, `${key} must be given once.`);
    // PostgreSQL text cannot hold NUL; sent on, it failed the query as a 500.
    if (value.includes('\u0000')) throw invalidParameter(key, `${key} must not contain a NUL character.`);
    filters.push({ op: op as NameOperator, value });
  }
  if (filters.length > 1) throw invalidParameter('name', 'At most one name filter may be given per request.');
  return filters[0];
}

/**
 * Literal matching: strpos/starts_with/right compare plain text, so %, _, \ and regex characters
 * match themselves (no LIKE patterns to escape).
 */
function nameCondition(sql: Sql, filter: NameFilter | undefined) {
  if (!filter) return sql`true`;
  const v = filter.value;
  switch (filter.op) {
    case 'equal':
      return sql`lower(name) = lower(${v})`;
    case 'not_equal':
      return sql`lower(name) <> lower(${v})`;
    case 'starts_with':
      return sql`starts_with(lower(name), lower(${v}))`;
    case 'ends_with':
      return sql`right(lower(name), char_length(${v})) = lower(${v})`;
    case 'contains':
      return sql`strpos(lower(name), lower(${v})) > 0`;
    case 'starts_with_case_sensitive':
      return sql`starts_with(name, ${v})`;
    case 'ends_with_case_sensitive':
      return sql`right(name, char_length(${v})) = ${v}`;
    case 'contains_case_sensitive':
      return sql`strpos(name, ${v}) > 0`;
  }
}

export async function listBrands(
  sql: Sql,
  accountId: string,
  query: { page?: number; pageSize?: number; sort?: 'name' | '-name'; enabled?: boolean },
  filter: NameFilter | undefined,
) {
  const p = pageOf(query);
  const enabled = query.enabled === undefined ? sql`true` : sql`enabled = ${query.enabled}`;
  // Case-insensitive name order with the id as a stable tie-break, so pages never overlap.
  const order = query.sort === '-name' ? sql`lower(name) desc, name desc, id desc` : sql`lower(name), name, id`;
  const rows = await sql<{ id: string; name: string; enabled: boolean; total: number }[]>`
    select id, name, enabled, count(*) over () as total
    from brands
    where account_id = ${accountId} and deleted_at is null and ${enabled} and ${nameCondition(sql, filter)}
    order by ${order}
    limit ${p.pageSize} offset ${p.offset}`;
  let total = rows[0]?.total;
  if (total === undefined) {
    // A page past the end returns no rows, yet totalCount still counts every match.
    const [c] = await sql<{ n: number }[]>`
      select count(*)::int as n from brands
      where account_id = ${accountId} and deleted_at is null and ${enabled} and ${nameCondition(sql, filter)}`;
    total = c!.n;
  }
  return {
    data: rows.map(({ id, name, enabled }) => ({ id, name, enabled })),
    pagination: pagination(p, Number(total)),
  };
}

import { type Sql, violates } from '../db';
import { invalidField, notFound, operationInProgress, pointer } from '../errors';
import { pageOf, pagination } from '../http/pagination';
import { getSchema } from '../schema/service';
import type { DownloadLinks } from './download';
import { MAX_FILTER_BRANDS, SHORTHAND_FIELDS, type CreateExportInput } from './model';
import { accountBrandsAmong, resolveFilter } from '../search/service';
import { exportRetryAfterSeconds, type OpenExport } from './retry-after';
import { EXPORT_COLUMNS, toExport, type ExportRow } from './view';

/**
 * The export's columns as the schema names them: each given name matched case-insensitively, once;
 * Email among them. Default: the whole schema in its order.
 */
export async function exportColumns(sql: Sql, accountId: string, given: readonly string[] | undefined) {
  const schema = await getSchema(sql, accountId);
  if (given === undefined) return schema.map((a) => a.name);
  const byLower = new Map(schema.map((a) => [a.name.toLowerCase(), a.name]));
  const seen = new Set<string>();
  const columns = given.map((name, i) => {
    const canonical = byLower.get(name.toLowerCase());
    if (canonical === undefined) {
      const derived = name.includes(':') && byLower.has(name.slice(0, name.lastIndexOf(':')).toLowerCase());
      throw invalidField(
        pointer('columns', i),
        derived
          ? `Column "${name}" is a derived sub-attribute: it is computed on read and is never a column.`
          : `Column "${name}" is not an attribute of the contact schema.`,
      );
    }
    if (seen.has(canonical)) throw invalidField(pointer('columns', i), `Column "${name}" is given twice.`);
    seen.add(canonical);
    return canonical;
  });
  if (!seen.has('Email')) throw invalidField('/columns', 'The columns must include Email.');
  return columns;
}

/** Keys that only a filter of the search language has: a filter with one of them is one. */
const SEARCH_KEYS = ['and', 'or', 'not', 'createdAt', 'attribute', 'op', 'value'];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What an export keeps of its `filter`: the shorthand's fields, or a search filter as sent. */
export interface ExportFilterInput {
  brandIds: string[] | null;
  enabled: boolean | null;
  search: unknown;
}

/**
 * The body's `filter`, told apart by its keys: a search filter (docs/searching.md), checked by
 * the search's own rules in createExport, or the shorthand `{brandIds?, enabled?}`, checked here. A
 * filter of the shorthand's keys alone (`{"enabled": false}`) means the same either way.
 */
export function readExportFilter(filter: unknown): ExportFilterInput {
  const none: ExportFilterInput = { brandIds: null, enabled: null, search: undefined };
  if (filter === undefined) return none;
  const keys = Object.keys(filter as object);
  if (keys.some((k) => SEARCH_KEYS.includes(k))) return { ...none, search: filter };
  const shorthand = filter as { brandIds?: unknown; enabled?: unknown };
  for (const key of keys)
    if (!(SHORTHAND_FIELDS as readonly string[]).includes(key))
      throw invalidField(
        pointer('filter', key),
        `Unknown field filter.${key}. Accepted: ${SHORTHAND_FIELDS.join(', ')}, or a filter of the search language.`,
      );
  const { brandIds, enabled } = shorthand;
  if (brandIds !== undefined) {
    if (!Array.isArray(brandIds) || brandIds.length < 1 || brandIds.length > MAX_FILTER_BRANDS)
      throw invalidField(
        '/filter/brandIds',
        `filter.brandIds must be an array of 1 to ${MAX_FILTER_BRANDS} brand ids.`,
      );
    brandIds.forEach((id, i) => {
      if (typeof id !== 'string' || !UUID.test(id))
        throw invalidField(pointer('filter', 'brandIds', i), 'Each brandIds entry must be a UUID.');
    });
  }
  if (enabled !== undefined && typeof enabled !== 'boolean')
    throw invalidField('/filter/enabled', 'filter.enabled must be true or false.');
  return {
    brandIds: brandIds ? [...new Set((brandIds as string[]).map((id) => id.toLowerCase()))] : null,
    enabled: (enabled as boolean | undefined) ?? null,
    search: undefined,
  };
}

export async function createExport(sql: Sql, links: DownloadLinks, accountId: string, body: CreateExportInput) {
  const columns = await exportColumns(sql, accountId, body.columns);
  const { brandIds, enabled, search } = readExportFilter(body.filter);
  // The search's own checks: the schema's attributes, operators and values, and its Brand ids.
  if (search !== undefined) await resolveFilter(sql, accountId, search);
  if (brandIds) {
    const known = await accountBrandsAmong(sql, accountId, brandIds);
    const missing = brandIds.find((id) => !known.has(id));
    if (missing) throw invalidField('/filter/brandIds', `Brand ${missing} is not a brand of this account.`);
  }
  try {
    const [row] = await sql<ExportRow[]>`
      insert into contact_exports (account_id, status, columns, brand_ids, enabled, search_filter, compression)
      values (${accountId}, 'queued', ${sql.array(columns)}, ${brandIds && sql.array(brandIds)}::uuid[], ${enabled},
        ${search === undefined ? null : sql.json(search as never)}, ${body.compression ?? 'none'})
      returning ${sql.unsafe(EXPORT_COLUMNS)}`;
    return toExport(row!, links);
  } catch (e) {
    if (!violates(e, 'contact_exports_one_open')) throw e;
    throw await busy(sql, accountId);
  }
}

/** The 409 for an account whose export is queued or exporting, with when to ask again. */
async function busy(sql: Sql, accountId: string) {
  const [open] = await sql<(OpenExport & { id: string })[]>`
    select id, status, started_at, rows_expected, rows_written from contact_exports
    where account_id = ${accountId} and status in ('queued', 'exporting')`;
  // Gone meanwhile: the next try will do; ask again at once.
  const seconds = open ? exportRetryAfterSeconds(open, new Date()) : 1;
  return operationInProgress(
    `Contact export ${open?.id ?? ''} of this account is ${open?.status ?? 'ending'}; one export runs at a time.`,
    seconds,
  );
}

export async function getExport(sql: Sql, links: DownloadLinks, accountId: string, exportId: string) {
  const [row] = await sql<ExportRow[]>`
    select ${sql.unsafe(EXPORT_COLUMNS)} from contact_exports where account_id = ${accountId} and id = ${exportId}`;
  if (!row) throw notFound(`No contact export ${exportId} in this account.`);
  return toExport(row, links);
}

export async function listExports(
  sql: Sql,
  links: DownloadLinks,
  accountId: string,
  query: { page?: number; pageSize?: number },
) {
  const p = pageOf(query);
  const rows = await sql<(ExportRow & { total: number })[]>`
    select ${sql.unsafe(EXPORT_COLUMNS)}, count(*) over () as total
    from contact_exports
    where account_id = ${accountId}
    order by created_at desc, id desc
    limit ${p.pageSize} offset ${p.offset}`;
  let total = rows[0]?.total;
  if (total === undefined) {
    // A page past the end returns no rows, yet totalCount still counts every export.
    const [c] = await sql<
      { n: number }[]
    >`select count(*)::int as n from contact_exports where account_id = ${accountId}`;
    total = c!.n;
  }
  const now = Date.now();
  return {
    data: await Promise.all(rows.map((r) => toExport(r, links, now))),
    pagination: pagination(p, Number(total)),
  };
}

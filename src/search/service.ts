import type { Sql, Tx } from '../db';
import { invalidField } from '../errors';
import { schemaOf, toContact, type ContactRow } from '../contacts/store';
import { md5ToUuid, uuidToMd5 } from '../contacts/email';
import type { ContactBody } from '../contacts/model';
import { filterDigest, formatSearchCursor, parseSearchCursor } from './cursor';
import { brandIdsOf, filterKey, parseFilter } from './filter';
import type { FilterNode } from './filter-types';
import { withSearchTimeout } from './run';
import { countStatement, pageStatement } from './statements';
import { talliedCount } from './stats';
import type { AttributeSchema } from '../contacts/attributes';

/** A request's filter, parsed against the account's schema and brands. */
export interface ResolvedFilter {
  node: FilterNode | undefined;
  schema: AttributeSchema;
}

/**
 * The filter of a search, count or export request: parsed against the account's schema (400 at the
 * node at fault), and every Brand id it names checked to be a brand of the account, deleted ones
 * included (contacts keep a deleted brand's id, and a filter may ask for them), as the export's
 * `brandIds` shorthand checks them.
 */
export async function resolveFilter(
  sql: Sql,
  accountId: string,
  raw: unknown,
  at = '/filter',
): Promise<ResolvedFilter> {
  const schema = await schemaOf(sql, accountId);
  if (raw === undefined) return { node: undefined, schema };
  const node = parseFilter(raw, { custom: schema.custom }, at);
  const named = brandIdsOf(node);
  const known = await accountBrandsAmong(
    sql,
    accountId,
    named.map((b) => b.id),
  );
  const missing = named.find((b) => !known.has(b.id));
  if (missing) throw invalidField(missing.at, `Brand ${missing.id} is not a brand of this account.`);
  return { node, schema };
}

/**
 * Which of these (lowercased) ids are brands of the account, deleted ones included: contacts keep a
 * deleted brand's id, and a filter (the search's or the export's shorthand) may ask for them.
 */
export async function accountBrandsAmong(sql: Sql, accountId: string, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await sql<{ id: string }[]>`
    select id::text from brands where account_id = ${accountId} and id = any(${sql.array([...new Set(ids)])}::uuid[])`;
  return new Set(rows.map((r) => r.id));
}

export interface SearchRequest {
  filter?: unknown;
  pageSize?: number;
  cursor?: unknown;
}

export interface SearchPage {
  data: ContactBody[];
  next: string | null;
}

export const DEFAULT_PAGE_SIZE = 100;

/**
 * POST /v1/contact-searches: one page of the account's contacts that pass the filter, by emailMd5
 * ascending. Keyset, never OFFSET: `email_md5 > after` in the primary key's order, so page 10,000
 * reads what page 1 reads. One row more than the page is read to know whether `next` is due.
 */
export async function searchContacts(
  sql: Sql,
  timeoutMs: number,
  accountId: string,
  body: SearchRequest,
): Promise<SearchPage> {
  const { node, schema } = await resolveFilter(sql, accountId, body.filter);
  const digest = filterDigest(filterKey(node));
  const cursor = body.cursor === undefined ? undefined : parseSearchCursor(body.cursor, digest);
  const pageSize = body.pageSize ?? DEFAULT_PAGE_SIZE;
  const { text, args } = pageStatement(accountId, node, cursor && md5ToUuid(cursor.after), pageSize + 1);
  const rows = await withSearchTimeout(sql, timeoutMs, 'page', (tx: Tx) =>
    tx.unsafe<ContactRow[]>(text, args as never[]),
  );
  const more = rows.length > pageSize;
  const page = more ? rows.slice(0, pageSize) : rows;
  return {
    data: page.map((row) => toContact(row, schema)),
    next: more ? formatSearchCursor({ after: uuidToMd5(page.at(-1)!.email_md5), filter: digest }) : null,
  };
}

/** POST /v1/contact-counts: how many of the account's contacts pass the filter, exactly. */
export async function countContacts(
  sql: Sql,
  timeoutMs: number,
  accountId: string,
  body: { filter?: unknown },
): Promise<{ count: number }> {
  const { node } = await resolveFilter(sql, accountId, body.filter);
  const tallied = await talliedCount(sql, accountId, node);
  if (tallied !== undefined) return { count: tallied };
  const { text, args } = countStatement(accountId, node);
  const [row] = await withSearchTimeout(sql, timeoutMs, 'count', (tx: Tx) =>
    tx.unsafe<{ n: string }[]>(text, args as never[]),
  );
  return { count: Number(row!.n) };
}

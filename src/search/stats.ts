import type { AnySql, Sql } from '../db';
import type { FilterNode } from './filter-types';

/**
 * GET /v1/contact-stats from the account's contact tallies (sql/migrations/0019_contact_tallies.sql):
 * delta rows appended by every write of contacts in its own transaction, summed here. Exact and
 * live: a write's deltas commit with it, so the next read sees them.
 */
export interface ContactStats {
  total: number;
  enabled: number;
  disabled: number;
  brands: { brandId: string; count: number }[];
}

/**
 * A read that finds more delta rows than this compacts the account before it answers (a few ms per
 * thousand rows); the worker's loop compacts the accounts no read does (compactBusyTallies).
 */
export const COMPACT_READ_AT = 1_000;

/** The worker's loop compacts an account that has more delta rows than this. */
export const COMPACT_LOOP_AT = 100;

interface StatsRow {
  brand_id: string | null;
  contacts: string;
  enabled: string;
  deltas: string;
}

/**
 * The account's totals and every live brand with its contacts, in GET /v1/brands' default order
 * (name case-insensitively, then name, then id). One statement naming the account on both tables:
 * on Citus it runs on the account's node as one task.
 */
export async function contactStats(sql: Sql, accountId: string): Promise<ContactStats> {
  const rows = await sql<StatsRow[]>`
    select brand_id, contacts, enabled, deltas
    from (
      select null::uuid as brand_id, null::text as name,
             coalesce(sum(contacts) filter (where brand_id is null), 0)::int8 as contacts,
             coalesce(sum(enabled) filter (where brand_id is null), 0)::int8 as enabled,
             count(*)::int8 as deltas
      from contact_tallies
      where account_id = ${accountId}
      union all
      select b.id, b.name, coalesce(t.contacts, 0)::int8, 0, 0
      from brands b
      left join (
        select brand_id, sum(contacts) as contacts
        from contact_tallies
        where account_id = ${accountId} and brand_id is not null
        group by brand_id
      ) t on t.brand_id = b.id
      where b.account_id = ${accountId} and b.deleted_at is null
    ) s
    order by brand_id is not null, lower(name), name, brand_id`;
  const [totals, ...brands] = rows;
  const total = Number(totals!.contacts);
  const enabled = Number(totals!.enabled);
  if (Number(totals!.deltas) > COMPACT_READ_AT) await compactContactTallies(sql, accountId);
  return {
    total,
    enabled,
    disabled: total - enabled,
    brands: brands.map((b) => ({ brandId: b.brand_id!, count: Number(b.contacts) })),
  };
}

/**
 * Replaces the account's delta rows by their sums: one row per brand id and one for the totals
 * (none for a sum of zero). Safe beside writers and other compactions: the DELETE takes the rows its
 * snapshot sees, and one that another compaction deleted first is skipped once that one commits
 * (READ COMMITTED re-checks a row it waited for), so each delta is summed by exactly one
 * compaction; rows appended meanwhile stay for the next. Both tables are named with the account:
 * on Citus the statement runs on the account's node.
 */
export async function compactContactTallies(sql: AnySql, accountId: string): Promise<void> {
  await sql`
    with gone as (
      delete from contact_tallies where account_id = ${accountId}
      returning brand_id, contacts, enabled
    )
    insert into contact_tallies (account_id, brand_id, contacts, enabled)
    select ${accountId}::uuid, brand_id, sum(contacts), sum(enabled)
    from gone
    group by brand_id
    having sum(contacts) <> 0 or sum(enabled) <> 0`;
}

/**
 * One pass of the worker's compaction loop: every account with more than COMPACT_LOOP_AT delta rows,
 * which bounds the rows of an account that is written and never read. True when it found some
 * (the loop then runs again at once, to catch what was appended meanwhile).
 */
export async function compactBusyTallies(sql: Sql, limit = 100): Promise<boolean> {
  const busy = await sql<{ account_id: string }[]>`
    select account_id from contact_tallies
    group by account_id
    having count(*) > ${COMPACT_LOOP_AT}
    limit ${limit}`;
  for (const { account_id } of busy) await compactContactTallies(sql, account_id);
  return busy.length === limit;
}

/**
 * A writer's deltas of one account's contact tallies, summed in memory before they are appended:
 * contacts, enabled contacts, and contacts per brand id.
 */
export class TallyDeltas {
  contacts = 0;
  enabled = 0;
  readonly brands = new Map<string, number>();

  brand(brandId: string, n: number): void {
    this.brands.set(brandId, (this.brands.get(brandId) ?? 0) + n);
  }
}

/**
 * Appends a bulk writer's deltas (the import's merge batches, worker/import/merge/batch.ts) in the
 * writer's transaction: one row for the totals and one per brand whose count moved, nothing for
 * zeros. One multi-row INSERT naming the account: on Citus it goes to the account's node.
 */
export async function appendContactTallies(sql: AnySql, accountId: string, d: TallyDeltas): Promise<void> {
  const rows = [
    ...(d.contacts !== 0 || d.enabled !== 0
      ? [{ brand_id: null as string | null, contacts: d.contacts, enabled: d.enabled }]
      : []),
    ...[...d.brands].filter(([, n]) => n !== 0).map(([brand_id, contacts]) => ({ brand_id, contacts, enabled: 0 })),
  ].map((r) => ({ account_id: accountId, ...r }));
  if (rows.length === 0) return;
  await sql`insert into contact_tallies ${sql(rows, 'account_id', 'brand_id', 'contacts', 'enabled')}`;
}

/**
 * The count of POST /v1/contact-counts when the tallies hold it: no filter (the account's contacts),
 * `{"enabled": b}`, or one Brand `contains`. Exact as the stats are, and read from a few delta rows
 * instead of counting the account's contacts. Undefined for every other filter: it is counted.
 */
export async function talliedCount(sql: Sql, accountId: string, node: FilterNode | undefined) {
  const brand =
    node?.kind === 'compare' && node.target.kind === 'brand' && node.op === 'contains' ? String(node.value) : null;
  if (node !== undefined && node.kind !== 'enabled' && brand === null) return undefined;
  const [row] = await sql<{ total: string; enabled: string; brand: string }[]>`
    select coalesce(sum(contacts) filter (where brand_id is null), 0)::int8 as total,
           coalesce(sum(enabled) filter (where brand_id is null), 0)::int8 as enabled,
           coalesce(sum(contacts) filter (where brand_id = ${brand}::uuid), 0)::int8 as brand
    from contact_tallies
    where account_id = ${accountId}`;
  if (brand !== null) return Number(row!.brand);
  if (node?.kind === 'enabled') return node.value ? Number(row!.enabled) : Number(row!.total) - Number(row!.enabled);
  return Number(row!.total);
}

import type { AnySql, Sql } from '../../src/db';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * How many parts the dedupe phase splits the staged rows into, by email_md5 range: each part is
 * sorted and written on its own backend at the same time, so dedupe uses both cores of a small
 * box instead of one (a 1M-row file: 3.7 s → 2.8 s). Parts follow email_md5 order, so together
 * they are the one ordered list the merge walks.
 */
export const MERGE_PARTS = 2;

/**
 * The storage parameters of every staging table: never autovacuumed. Each is written once, read
 * once or twice and dropped; the dedupe analyzes the merge parts itself, and the plan tables have
 * a VACUUM of their own (merge/plan-vacuum.ts). Left to autovacuum (its threshold counts inserts
 * since PostgreSQL 13), a 25M-row import B had a 6 GB merge part vacuumed while its merge read it
 * (still under way after 2 minutes): the whole part read again from disk and its pages dirtied for
 * their hint bits, and, while such a worker's ANALYZE ran, the plan tables' dead rows held back.
 * The API of other accounts felt it most: `bun run bench -- --rows 5000000 --steps mixed`, p99
 * while import A merges over idle, 1.52-1.76 × with this against 1.78-3.25 × without (two runs
 * each, bench/findings/2026-11-27-staging-no-autovacuum.md). (Anti-wraparound vacuums still run: this does not stop
 * them.)
 */
export const STAGING_STORAGE = 'with (autovacuum_enabled = false)';

/** One part of the deduplicated rows: its table and the email_md5 range it holds, [from, to). */
export interface MergePart {
  table: string;
  /** what each merge batch decided for its rows of this part, until the batch ends (merge-batch.sql) */
  plan: string;
  /** inclusive lower bound as a uuid, or null for the first part */
  from: string | null;
  /** exclusive upper bound as a uuid, or null for the last part */
  to: string | null;
}

/** Names of one import's staging tables, all UNLOGGED. */
export interface StagingTables {
  /** What the read phase COPYs validated rows into (rowsTableDdl). */
  rows: string;
  /**
   * What the dedupe phase writes, one table per email_md5 range: `seq` (1…rows of the part, in
   * email_md5 order) and the staged columns but row_no. Merge seq n of the import is row
   * n - (rows of the parts before) of its part.
   */
  parts: MergePart[];
  /**
   * Emails the read phase saw more than once, perhaps (worker/import/repeats.ts): where the
   * duplicate rows of the rejected-rows report are looked for.
   */
  repeats: string;
  /**
   * The staged rows whose email is in `repeats`, gathered piece by piece while the duplicate rows
   * are looked for (rejects.ts: recordDuplicates), and dropped when they are found.
   */
  repeatRows: string;
  /**
   * The rows of the file that were not added or updated, and why (worker/import/rejects.ts).
   * LOGGED, unlike the rest: merge batches add their skipped rows in their own commits, which a
   * crash must not take back. Not dropped with the staging; see dropRejects.
   */
  rejects: string;
}

/**
 * The per-import staging tables. Names are built from the import id alone (checked to be a
 * uuid, so only hex digits reach the SQL text), which makes every step that creates or drops them
 * idempotent across restarts and workers.
 */
export function stagingTables(importId: string): StagingTables {
  if (!UUID.test(importId)) throw new Error(`import id ${importId} is not a uuid`);
  const hex = importId.replaceAll('-', '').toLowerCase();
  // A part's bounds are slice bounds too: the slices of a part are exactly those between its bounds.
  const parts = Array.from({ length: MERGE_PARTS }, (_, k) => ({
    table: `import_merge_${hex}_${k}`,
    plan: `import_plan_${hex}_${k}`,
    from: openBound(k, MERGE_PARTS),
    to: openBound(k + 1, MERGE_PARTS),
  }));
  return {
    rows: `import_rows_${hex}`,
    parts,
    repeats: `import_repeats_${hex}`,
    repeatRows: `import_repeat_rows_${hex}`,
    rejects: `import_rejects_${hex}`,
  };
}

/**
 * Where one import's staging lives. On plain PostgreSQL its own tables, named for it, made when a
 * phase needs them and dropped after: a table costs milliseconds there. On a Citus cluster a set of
 * the staging pool (staging-pool.ts), claimed for the import: there a distributed table of 32
 * shards takes about a second to make and half a second to drop, and an import makes eight, which
 * kept a 4-row import 14 s from its PUT to `success`. A pooled set's tables always exist and are
 * emptied instead of dropped; its rows table takes its account from the session (SESSION_ACCOUNT).
 */
export interface Staging {
  tables: StagingTables;
  pooled: boolean;
  /** the import's account: every row of the tables is its */
  accountId: string;
}

/** An import's own staging tables (plain PostgreSQL). */
export function ownStaging(importId: string, accountId: string): Staging {
  return { tables: stagingTables(importId), pooled: false, accountId };
}

/**
 * The default of a pooled rows table's `account_id`: the account its COPY's session set
 * (useSessionAccount). Citus evaluates a COPY's defaults on the node it enters, where the session
 * is, and routes each row by the value. A distribution column's default cannot be altered, so a
 * pooled set, which serves one account after another, cannot have a literal one.
 */
export const SESSION_ACCOUNT = `current_setting('contacts.staging_account')::uuid`;

/** Sets the account a pooled rows table's COPY stages rows for, on the session that runs it. */
export async function useSessionAccount(sql: AnySql, accountId: string): Promise<void> {
  await sql`select set_config('contacts.staging_account', ${uuid(accountId)}, false)`;
}

/** The default of an own rows table's `account_id`: the import's account, written in. */
export function accountLiteral(accountId: string): string {
  return `'${uuid(accountId)}'::uuid`;
}

/** Makes own staging tables from their DDL (a pooled set has its tables for good: nothing to do). */
export async function createTables(sql: AnySql, s: Staging, ddl: readonly string[]): Promise<void> {
  if (s.pooled) return;
  for (const statement of ddl) await sql.unsafe(statement);
}

/**
 * Rows of a pooled table that may stay until its set is released (releaseStaging empties it then):
 * a few MB at most, where emptying the table at once would cost the import a TRUNCATE.
 */
const KEPT_UNTIL_RELEASE = 100_000;

/**
 * Lets tables of the staging go. Own ones are dropped (if there). Pooled ones are emptied, but only
 * those holding rows (heldTables): a TRUNCATE of a distributed table reaches each of its 32 shards
 * (about 0.2 s a table on the embedded cluster, 1.1-1.4 s for a set's seven), where the probe reads
 * the account's shard alone. `rows`, when the caller knows how many rows the tables hold at most:
 * under KEPT_UNTIL_RELEASE, pooled tables keep them until the set is released.
 */
export async function discardTables(sql: AnySql, s: Staging, tables: readonly string[], rows?: number): Promise<void> {
  if (!s.pooled) {
    if (tables.length > 0) await sql.unsafe(`drop table if exists ${tables.join(', ')}`);
    return;
  }
  if (rows !== undefined && rows < KEPT_UNTIL_RELEASE) return;
  await emptyTables(sql, tables, s.accountId);
}

/** Empties those of `tables`, each distributed by account and holding only `accountId`'s rows, that hold any. */
export async function emptyTables(sql: AnySql, tables: readonly string[], accountId: string): Promise<void> {
  const held = await heldTables(sql, tables, accountId);
  if (held.length > 0) await sql.unsafe(`truncate ${held.join(', ')}`);
}

/**
 * Those of `tables` that hold a row of `accountId`: one statement, which on a cluster runs whole on
 * the node of the account's shards (the tables are colocated).
 */
async function heldTables(sql: AnySql, tables: readonly string[], accountId: string): Promise<string[]> {
  if (tables.length === 0) return [];
  const probes = tables.map((t) => `exists (select 1 from ${t} where account_id = $1::uuid)`);
  const [row] = await sql.unsafe<{ held: boolean[] }[]>(`select array[${probes.join(', ')}] as held`, [
    uuid(accountId),
  ]);
  return tables.filter((_, i) => row!.held[i]);
}

/** Makes `table` of the staging anew, empty: an own one dropped and made from `ddl`, a pooled one emptied. */
export async function renewTable(sql: AnySql, s: Staging, table: string, ddl: readonly string[]): Promise<void> {
  await discardTables(sql, s, [table]);
  await createTables(sql, s, ddl);
}

/** `id`, checked to be a uuid: safe to write into SQL text as a literal. */
export function uuid(id: string): string {
  if (!UUID.test(id)) throw new Error(`${id} is not a uuid`);
  return id;
}

/** The uuid whose 128 bits are `n`. */
function uuidAt(n: bigint): string {
  const h = n.toString(16).padStart(32, '0');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Every table of a staging but its rejected rows: what a read that starts over makes anew. */
export function stagedRowTables(t: StagingTables): string[] {
  return [t.rows, t.repeats, t.repeatRows, ...t.parts.flatMap((x) => [x.table, x.plan])];
}

/**
 * Makes a staging table just created distributed like the contacts on a Citus cluster (migration
 * 0007's distribute_by_account; nothing on plain PostgreSQL). Every staging table has the import's
 * `account_id`, and every statement on one names it, so on a cluster each runs whole on the node of
 * the account's shards, the merge's INSERT … SELECT included: nothing is pulled to the coordinator.
 * Only the staging pool makes distributed staging tables (staging-pool.ts).
 */
export async function distributeStaging(sql: AnySql, table: string): Promise<void> {
  await sql`select distribute_by_account(${table}::regclass)`;
}

/**
 * DDL of one part of the merge table (dedupe.ts fills it). An own part gets its primary key after
 * it is filled (one sort of the rows instead of an insert into the index for each); a pooled one
 * has it for good, and is filled in seq order, so each row goes to the index's last page.
 */
export function mergePartDdl(table: string, primaryKey = false): string {
  return `
    create unlogged table if not exists ${table} (
      account_id uuid not null, seq int8 not null, email_md5 uuid not null, row_no int8 not null,
      email text not null, attributes jsonb not null, brand_ids uuid[] not null, attribute_count int2 not null
      ${primaryKey ? ', primary key (account_id, seq)' : ''}
    ) ${STAGING_STORAGE}`;
}

/**
 * DDL of the plan table of one part of the merge table, which only a cluster's merge batches use
 * (merge-batch.sql): each writes what it decided for each of its rows there and deletes them again
 * before it commits, so it holds rows only while batches run. UNLOGGED: a crash takes the batches
 * with it.
 */
export function planTableDdl(table: string): string {
  return `
    create unlogged table if not exists ${table} (
      account_id     uuid   not null,
      seq            int8   not null,
      row_no         int8   not null,
      email_md5      uuid   not null,
      email          text   not null,
      attributes     jsonb,
      brand_ids      uuid[],
      assigned_brand_ids uuid[] not null,
      skip_reason    text   not null,
      outcome        text   not null,
      dropped_brand_ids uuid[],
      reenabled      boolean not null default false,
      primary key (account_id, seq)
    ) ${STAGING_STORAGE}`;
}

/**
 * DDL of the table the read phase COPYs validated rows into. UNLOGGED: it is rebuilt from the file
 * after any crash anyway, so WAL for it would be pure cost. `account_id` is the import's account,
 * filled by its default (the COPY does not send it): `accountDefault`, accountLiteral or
 * SESSION_ACCOUNT. `row_no` is the data row's position in the
 * file; the last row per email wins at dedupe. `attribute_count` is how many attributes the row
 * sent (keys of `attributes`): a row that sends every attribute of the schema replaces a contact's
 * attributes whole under `overwrite`, and merge-batch.sql skips the jsonb merge for it.
 *
 * `attributes` is the JSON object's text, which the worker wrote (always valid JSON), parsed into
 * jsonb by the dedupe for the rows it keeps. As jsonb it was parsed on its way in: on a Citus
 * cluster by the coordinator, for every row, and printed again for the worker, which parsed it a
 * second time (Citus skips that parse for a text COPY, not for a binary one): the coordinator's
 * read went from 4.35 to 9.85 CPU s per 1M rows when the COPY became binary
 * (bench/findings/2026-11-29-read-json-on-citus-coordinator.md).
 *
 * With `slices` > 1 the table is partitioned by email_md5 range into that many equal slices
 * (stagingSlices), named `<table>_<i>` in email_md5 order; the COPY into the table routes each row.
 * One statement per element, in order.
 */
export function rowsTableDdl(table: string, accountDefault: string, slices = 1): string[] {
  const columns = `
      account_id uuid   not null default ${accountDefault},
      row_no     bigint not null,
      email_md5  uuid   not null,
      email      text   not null,
      attributes text   not null,
      brand_ids  uuid[] not null,
      attribute_count int2 not null`;
  if (slices <= 1) return [`create unlogged table if not exists ${table} (${columns}\n    ) ${STAGING_STORAGE}`];
  const bound = (i: number) => (i === 0 ? 'minvalue' : i === slices ? 'maxvalue' : `'${sliceBound(i, slices)}'`);
  return [
    `create unlogged table if not exists ${table} (${columns}\n    ) partition by range (email_md5)`,
    ...Array.from(
      { length: slices },
      (_, i) =>
        `create unlogged table if not exists ${sliceTable(table, i)} partition of ${table}
         for values from (${bound(i)}) to (${bound(i + 1)}) ${STAGING_STORAGE}`,
    ),
  ];
}

/**
 * CSV bytes of a slice of the staged rows. The dedupe sorts each slice's rows in memory with its 1 GB
 * of work_mem: a staged row takes about 2.5 × its CSV bytes there (477 bytes for a 187-byte row of
 * the bench's file), so 320 MB of such rows sort in ~820 MB. A sort that does not fit spills to
 * disk: half of 5M rows was an external merge of 1 GB that took 10.7 s, against 2 × 2.3 s for its
 * two halves sorted in memory. Not smaller: the COPY routes each row to its slice and flushes its
 * buffered rows to every slice at once, so more slices write smaller batches (2M rows into one
 * table 5.7-6.0 s, into 10 slices 6.6-6.7 s, into 20 8.1-10.3 s). Narrow rows (an email and little
 * else) take more memory per CSV byte; their sorts may spill, as every big part's did before.
 */
const SLICE_BYTES = 320 << 20;

/**
 * How many slices the staged rows of a file of `objectSize` bytes are partitioned into: a multiple
 * of MERGE_PARTS (each part of the merge table is built from whole slices), 1 (no partitions) for
 * files up to MERGE_PARTS slices' worth, where the parts' sorts fit in memory anyway. The size is
 * the stored object's: a gzip file is cut as if its text were that small (its sorts may spill).
 */
export function stagingSlices(objectSize: number): number {
  const perPart = Math.ceil(objectSize / (MERGE_PARTS * SLICE_BYTES));
  return perPart <= 1 ? 1 : perPart * MERGE_PARTS;
}

/** Whether the contacts are distributed, i.e. the database is a Citus cluster (migration 0007). */
export async function onCluster(sql: AnySql): Promise<boolean> {
  const [r] = await sql<{ distributed: boolean }[]>`select is_distributed('contacts') as distributed`;
  return r?.distributed === true;
}

/** The table of slice `i` of a partitioned staging table. */
export function sliceTable(rows: string, i: number): string {
  return `${rows}_${i}`;
}

/** The lower email_md5 bound of slice `i` of `slices` (0 < i < slices): i / slices of the uuid space. */
function sliceBound(i: number, slices: number): string {
  return uuidAt((BigInt(i) << 128n) / BigInt(slices));
}

/** One table of staged rows and the email_md5 range it holds, [from, to) (null: open). */
export interface StagedTable {
  table: string;
  from: string | null;
  to: string | null;
}

/** The tables that hold the import's staged rows, in email_md5 order: its slices, or the one table. */
export async function stagedTables(sql: AnySql, rows: string): Promise<StagedTable[]> {
  const slices = await slicesOf(sql, rows);
  if (slices === 1) return [{ table: rows, from: null, to: null }];
  return Array.from({ length: slices }, (_, i) => ({
    table: sliceTable(rows, i),
    from: openBound(i, slices),
    to: openBound(i + 1, slices),
  }));
}

/** Bound `i` of `n` equal email_md5 ranges as a uuid, null at either end (open). */
function openBound(i: number, n: number): string | null {
  return i === 0 || i === n ? null : sliceBound(i, n);
}

/**
 * The SQL condition that keeps the email_md5 range [from, to) (null: open), as ` and …` clauses to
 * append to a WHERE (empty for the whole range). The bounds are uuids this code computed, not input.
 */
export function md5RangeCondition(from: string | null, to: string | null): string {
  return [from && `email_md5 >= '${uuid(from)}'`, to && `email_md5 < '${uuid(to)}'`]
    .filter(Boolean)
    .map((c) => ` and ${c}`)
    .join('');
}

/** How many slices the import's staging table has: 1 when it is not partitioned (or is missing). */
export async function slicesOf(sql: AnySql, rows: string): Promise<number> {
  const [r] = await sql<{ n: number }[]>`
    select count(*)::int as n from pg_inherits where inhparent = to_regclass(${rows})`;
  return Math.max(1, Number(r?.n ?? 0));
}

/**
 * Whether an unlogged staging table holds any row. A crash empties such a table as a whole, so one
 * row present means all are: no count of the whole table (a full scan, ~5 s at 25M rows) to check.
 */
export async function hasRows(sql: Sql, table: string, accountId: string): Promise<boolean> {
  const [r] = await sql.unsafe<{ any: boolean }[]>(
    `select exists (select 1 from ${table} where account_id = $1::uuid) as any`,
    [accountId],
  );
  return r!.any;
}

/**
 * Rows in each part of the merge table (its highest seq: one primary-key probe), or undefined
 * when a part is missing, or was made by a worker from before staging tables had `account_id`.
 */
export async function partSizes(sql: Sql, t: StagingTables, accountId: string): Promise<number[] | undefined> {
  const sizes: number[] = [];
  for (const part of t.parts) {
    const [rel] = await sql<{ present: boolean }[]>`
      select exists (select 1 from pg_attribute
                     where attrelid = to_regclass(${part.table}) and attname = 'account_id') as present`;
    if (!rel!.present) return undefined;
    const [r] = await sql.unsafe<{ n: number }[]>(
      `select coalesce(max(seq), 0)::int8 as n from ${part.table} where account_id = $1::uuid`,
      [accountId],
    );
    sizes.push(Number(r!.n));
  }
  return sizes;
}

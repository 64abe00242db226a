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
 * each, bench/README.md, session 17). (Anti-wraparound vacuums still run: this does not stop them.)
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

/** Every table name of one import's staging, for `drop table if exists`. */
function allStagingTables(t: StagingTables): string {
  return [t.rows, t.repeats, t.repeatRows, ...t.parts.flatMap((x) => [x.table, x.plan])].join(', ');
}

/**
 * Makes a staging table just created distributed like the contacts on a Citus cluster (migration
 * 0007's distribute_by_account; nothing on plain PostgreSQL). Every staging table has the import's
 * `account_id`, and every statement on one names it, so on a cluster each runs whole on the node of
 * the account's shards, the merge's INSERT … SELECT included: nothing is pulled to the coordinator.
 */
export async function distributeStaging(sql: AnySql, table: string): Promise<void> {
  await sql`select distribute_by_account(${table}::regclass)`;
}

/** DDL of one part of the merge table (dedupe.ts fills it). */
export function mergePartDdl(table: string): string {
  return `
    create unlogged table ${table} (
      account_id uuid not null, seq int8 not null, email_md5 uuid not null, row_no int8 not null,
      email text not null, attributes jsonb not null, brand_ids uuid[] not null, attribute_count int2 not null
    ) ${STAGING_STORAGE}`;
}

/**
 * Makes (if missing) the plan table of one part of the merge table: each merge batch writes what it
 * decided for each of its rows there and deletes them again before it commits (merge-batch.sql), so
 * it holds rows only while batches run. UNLOGGED: a crash takes the batches with it.
 */
export async function ensurePlanTable(sql: AnySql, table: string): Promise<void> {
  await sql.unsafe(`
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
      primary key (account_id, seq)
    ) ${STAGING_STORAGE}`);
  await distributeStaging(sql, table);
}

/**
 * DDL of the table the read phase COPYs validated rows into. UNLOGGED: it is rebuilt from the file
 * after any crash anyway, so WAL for it would be pure cost. `account_id` is the import's account,
 * filled by its default (the COPY does not send it). `row_no` is the data row's position in the
 * file; the last row per email wins at dedupe. `attribute_count` is how many attributes the row
 * sent (keys of `attributes`): a row that sends every attribute of the schema replaces a contact's
 * attributes whole under `overwrite`, and merge-batch.sql skips the jsonb merge for it.
 *
 * With `slices` > 1 the table is partitioned by email_md5 range into that many equal slices
 * (stagingSlices), named `<table>_<i>` in email_md5 order; the COPY into the table routes each row.
 * One statement per element, in order.
 */
export function rowsTableDdl(table: string, accountId: string, slices = 1): string[] {
  const columns = `
      account_id uuid   not null default '${uuid(accountId)}',
      row_no     bigint not null,
      email_md5  uuid   not null,
      email      text   not null,
      attributes jsonb  not null,
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

/**
 * stagingSlices, on plain PostgreSQL. On a Citus cluster the staged rows stay one table: each
 * partition would be a distributed table of its own, with its 32 shards made and dropped per import.
 */
export async function slicesFor(sql: AnySql, objectSize: number): Promise<number> {
  return (await onCluster(sql)) ? 1 : stagingSlices(objectSize);
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
 * Drops the staging tables (not the rejected rows: a read that starts over during a merge keeps
 * the merge's); safe to run any number of times, on any connection.
 */
export async function dropStaging(sql: Sql, importId: string): Promise<void> {
  await sql.unsafe(`drop table if exists ${allStagingTables(stagingTables(importId))}`);
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

/** Drops the import's rejected rows, once its report is written (or it failed); idempotent. */
export async function dropRejects(sql: Sql, importId: string): Promise<void> {
  await sql.unsafe(`drop table if exists ${stagingTables(importId).rejects}`);
}

/**
 * Rows in each part of the merge table (its highest seq: one primary-key probe), or undefined
 * when a part is missing, or was made by a worker from before staging tables had `account_id`.
 */
export async function partSizes(sql: Sql, importId: string, accountId: string): Promise<number[] | undefined> {
  const sizes: number[] = [];
  for (const part of stagingTables(importId).parts) {
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

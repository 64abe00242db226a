import type { AnySql, Sql, Tx } from '../../src/db';
import { READ_REASONS, type Reason } from '../../src/imports/rejections';
import { InsertQueue } from './insert-queue';
import type { Pacer } from './pace';
import {
  md5RangeCondition,
  renewTable,
  stagedTables,
  STAGING_STORAGE,
  uuid,
  type StagedTable,
  type Staging,
  type StagingTables,
} from './staging';

/**
 * The import's rejected rows, for its report (worker/import/report.ts): one row per data row of
 * the file that was not added or updated, with its reason code, the column at fault (an index
 * into the import's columns) and a number some reasons carry (the field count of a row of the
 * wrong width, the row that superseded a duplicate). The row's cells are not kept here: the
 * report takes them from the file itself, which costs far less than staging every row's text.
 *
 * The read phase writes the malformed rows, the merge phase the duplicate ones (recordDuplicates),
 * and each merge batch its skipped rows in its own transaction (sql/merge/merge-batch.sql), so the
 * table is logged. It holds only rejected rows, so its WAL is small.
 */
export function rejectsTableDdl(table: string): string {
  return `
    create table if not exists ${table} (
      account_id uuid not null,
      row_no     int8 not null,
      reason     text not null,
      column_no  int2,
      info       int8,
      primary key (account_id, row_no)
    )`;
}

/** Makes the import's rejects table if missing; a pooled set has its own for good (staging-pool.ts). */
export async function ensureRejectsTable(sql: AnySql, s: Staging, accountId: string): Promise<void> {
  if (s.pooled) return;
  const table = s.tables.rejects;
  await sql.unsafe(rejectsTableDdl(table));
  // Made by a worker from before staging tables had the account (on plain PostgreSQL: a cluster
  // never had those): its rows are this import's.
  const [made] = await sql<{ old: boolean }[]>`
    select not exists (select 1 from pg_attribute
                       where attrelid = ${table}::regclass and attname = 'account_id') as old`;
  if (made!.old)
    await sql.unsafe(`alter table ${table} add column account_id uuid not null default '${uuid(accountId)}'`);
}

/** DDL of the table the duplicate rows' scan gathers the staged rows of repeated emails into. */
export function repeatRowsDdl(table: string): string {
  return `create unlogged table if not exists ${table} (
      account_id uuid not null, email_md5 uuid not null, row_no int8 not null
    ) ${STAGING_STORAGE}`;
}

/** A read that starts over forgets what the last read found; a merge's skipped rows stay. */
export async function forgetRead(sql: Sql, table: string, accountId: string): Promise<void> {
  await sql.unsafe(`delete from ${table} where account_id = $1::uuid and reason = any($2::text[])`, [
    accountId,
    READ_REASONS,
  ]);
}

/** Rows per INSERT: a statement's own cost vanishes, memory stays flat. */
export const FLUSH_ROWS = 5_000;

/**
 * Collects the read phase's malformed rows and writes them in multi-row INSERTs in the background
 * while the file is read. `close` waits for the last; the first failure is thrown by `add` or `close`.
 */
export class RejectWriter {
  private rowNos: number[] = [];
  private reasons: Reason[] = [];
  private columns: (number | null)[] = [];
  private infos: (number | null)[] = [];
  /** its inserts, running behind the read (the reader pauses while it is not `ready`) */
  readonly queue: InsertQueue;
  count = 0;

  constructor(
    sql: Sql,
    private readonly table: string,
    private readonly accountId: string,
  ) {
    this.queue = new InsertQueue(sql);
  }

  add(rowNo: number, reason: Reason, column: number, info: number | null = null): void {
    this.rowNos.push(rowNo);
    this.reasons.push(reason);
    this.columns.push(column < 0 ? null : column);
    this.infos.push(info);
    this.count++;
    if (this.rowNos.length >= FLUSH_ROWS) this.flush();
  }

  close(): Promise<void> {
    this.flush();
    return this.queue.close();
  }

  private flush(): void {
    if (this.rowNos.length === 0) return;
    this.queue.push(
      `insert into ${this.table} (account_id, row_no, reason, column_no, info)
       select $1::uuid, * from unnest($2::int8[], $3::text[], $4::int2[], $5::int8[])`,
      [this.accountId, this.rowNos, this.reasons, this.columns, this.infos],
    );
    this.rowNos = [];
    this.reasons = [];
    this.columns = [];
    this.infos = [];
  }
}

/**
 * Pages of staged rows one piece of the duplicate scan reads while the API is busy (16 MB, about
 * 35,000 rows: 20-60 ms, like a paced merge piece), and otherwise (128 MB: ~0.2-0.3 s, so a load
 * that starts meanwhile waits no longer for the scan to pace; each piece builds the hash of its
 * table's repeats again, ~80 times for a 25M-row file).
 */
export const PACED_PAGES = 2_048;
const PAGES = 16_384;

/**
 * The duplicate rows: every staged row whose email a later staged row has too, with that email's
 * last row (the one dedupe keeps). Only emails in `repeats` are looked at, which the read phase
 * filled with every email it may have seen before (a superset: see worker/import/repeats.ts). The
 * dedupe phase keeps the staged rows for this only when it dropped rows: a file without repeated
 * emails, whose filter still flags about 1% of its emails, costs no scan. Replaces the rows an
 * earlier run recorded, in one commit; returns how many.
 *
 * Two steps. The staged rows of repeated emails are gathered into `repeatRows` (which the caller
 * drops with the staged rows): a scan of the staged rows against a hash of the repeats (0.3-1.2 s
 * per 1M rows), in pieces of pages (a TID range scan), table by table, each against only the
 * repeats of its table's email_md5 range; then one window over those few rows finds the duplicates.
 * It runs beside the merge's batches, so it gives the API room as they do (pace.ts): while the API
 * is busy its pieces are small and rested after. On a Citus cluster the staged rows are one
 * distributed table, which a TID range cannot cut: one piece.
 */
export async function recordDuplicates(sql: Sql, s: Staging, accountId: string, pacer: Pacer): Promise<number> {
  const t = s.tables;
  const sources = await stagedTables(sql, t.rows);
  // Made anew before the scan's transaction, not in it: on a Citus cluster a TRUNCATE takes a lock
  // that a shard rebalance waits for, held to the end of the transaction, and this one lasts as
  // long as the scan (minutes while paced). Let go with the staged rows (duplicates.ts).
  await renewTable(sql, s, t.repeatRows, [repeatRowsDdl(t.repeatRows)]);
  return sql.begin(async (tx) => {
    // The plan of a piece is a hash of the repeats probed by every staged row of its pages. The
    // staged rows' statistics say nothing of a TID range (estimated at one row), which made it a
    // nested loop over the repeats for every row: minutes for a slice of 1.2M rows.
    await tx`
      select set_config('enable_nestloop', 'off', true), set_config('enable_mergejoin', 'off', true),
             set_config('jit', 'off', true)`;
    await tx.unsafe(`delete from ${t.rejects} where account_id = $1::uuid and reason = 'duplicate_in_file'`, [
      accountId,
    ]);
    for (const source of sources) await gatherRepeatRows(tx, t, source, accountId, pacer);
    const written = await tx.unsafe(
      `insert into ${t.rejects} (account_id, row_no, reason, info)
       select $1::uuid, row_no, 'duplicate_in_file', last_row
       from (
         select row_no, max(row_no) over (partition by email_md5) as last_row
         from ${t.repeatRows}
         where account_id = $1::uuid
       ) per_email
       where row_no < last_row`,
      [accountId],
    );
    return written.count;
  });
}

/** The staged rows of one table whose email is in the repeats, into `repeatRows`, piece by piece. */
async function gatherRepeatRows(
  tx: Tx,
  t: Pick<StagingTables, 'repeats' | 'repeatRows'>,
  source: StagedTable,
  accountId: string,
  pacer: Pacer,
): Promise<void> {
  const [size] = await tx<{ distributed: boolean; pages: string }[]>`
    select is_distributed(${source.table}::regclass) as distributed,
           pg_relation_size(${source.table}::regclass) / current_setting('block_size')::int8 as pages`;
  const range = md5RangeCondition(source.from, source.to);
  const gather = (pages: string) =>
    tx.unsafe(
      `insert into ${t.repeatRows} (account_id, email_md5, row_no)
       select account_id, email_md5, row_no from ${source.table}
       where account_id = $1::uuid${pages}
         and email_md5 in (select email_md5 from ${t.repeats} where account_id = $1::uuid${range})`,
      [accountId],
    );
  // The read phase is over: the table no longer grows. The last piece is open-ended all the same.
  // Page numbers are this code's, not input.
  const pages = size!.distributed ? 0 : Number(size!.pages);
  let at = 0;
  do {
    const paced = pacer.busy();
    const end = at + (paced ? PACED_PAGES : PAGES);
    const from = at > 0 ? ` and ctid >= '(${at},0)'::tid` : '';
    const to = end < pages ? ` and ctid < '(${end},0)'::tid` : '';
    await pacer.piece(paced, () => gather(from + to));
    at = end;
  } while (at < pages);
}

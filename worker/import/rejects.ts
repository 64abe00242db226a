import type { AnySql, Sql } from '../../src/db';
import { READ_REASONS, type Reason } from '../../src/imports/rejections';
import { InsertQueue } from './insert-queue';
import { distributeStaging, uuid } from './staging';

/**
 * The import's rejected rows, for its report (worker/import/report.ts): one row per data row of
 * the file that was not added or updated, with its reason code, the column at fault (an index
 * into the import's columns) and a number some reasons carry (the field count of a row of the
 * wrong width, the row that superseded a duplicate). The row's cells are not kept here: the
 * report takes them from the file itself, which costs far less than staging every row's text.
 *
 * The read phase writes the malformed rows, the dedupe phase the duplicate ones (recordDuplicates),
 * and each merge batch its skipped rows in its own transaction (sql/merge/merge-batch.sql), so the
 * table is logged. It holds only rejected rows, so its WAL is small.
 */
export async function ensureRejectsTable(sql: AnySql, table: string, accountId: string): Promise<void> {
  await sql.unsafe(`
    create table if not exists ${table} (
      account_id uuid not null,
      row_no     int8 not null,
      reason     text not null,
      column_no  int2,
      info       int8,
      primary key (account_id, row_no)
    )`);
  // Made by a worker from before staging tables had the account (on plain PostgreSQL: a cluster
  // never had those): its rows are this import's.
  const [made] = await sql<{ old: boolean }[]>`
    select not exists (select 1 from pg_attribute
                       where attrelid = ${table}::regclass and attname = 'account_id') as old`;
  if (made!.old)
    await sql.unsafe(`alter table ${table} add column account_id uuid not null default '${uuid(accountId)}'`);
  await distributeStaging(sql, table);
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
 * The duplicate rows: every staged row whose email a later staged row has too, with that email's
 * last row (the one dedupe keeps). Only emails in `repeats` are looked at, which the read phase
 * filled with every email it may have seen before (a superset: see worker/import/repeats.ts), so
 * this is one scan of the staged rows against a small hash (0.3-0.4 s per 1M rows). The dedupe phase
 * runs it only when it dropped rows: a file without repeated emails, whose filter still flags about
 * 1% of its emails, costs no scan. Replaces the rows an earlier run recorded; returns how many.
 */
export async function recordDuplicates(
  sql: Sql,
  t: { rows: string; repeats: string; rejects: string },
  accountId: string,
) {
  return sql.begin(async (tx) => {
    await tx.unsafe(`delete from ${t.rejects} where account_id = $1::uuid and reason = 'duplicate_in_file'`, [
      accountId,
    ]);
    const written = await tx.unsafe(
      `insert into ${t.rejects} (account_id, row_no, reason, info)
     select $1::uuid, row_no, 'duplicate_in_file', last_row
     from (
       select r.row_no, max(r.row_no) over (partition by r.email_md5) as last_row
       from ${t.rows} r
       where r.account_id = $1::uuid
         and r.email_md5 in (select email_md5 from ${t.repeats} where account_id = $1::uuid)
     ) per_email
     where row_no < last_row`,
      [accountId],
    );
    return written.count;
  });
}

import type { ReservedSql } from 'postgres';
import { type Sql, violates, isConnectionGone, suppressionListLock, tryAccountXactLock } from '../../db';
import { operationInProgress } from '../../errors';

export type Conn = ReservedSql<{}>;

export interface HeldImport {
  accountId: string;
  listId: string;
  method: 'api' | 'manual';
  /** Expected duration, for the Retry-After others get meanwhile. */
  estimatedSeconds: number;
  /** What `failure_reason` says when `run` throws; the error message is appended for manual imports. */
  describeFailure: (error: unknown) => string;
}

const INTERRUPTED = 'The process running this import stopped before it finished; nothing was applied.';

/**
 * Runs one import of a list while holding the list, so a list takes one import at a time.
 *
 * The holder's connection opens a transaction and takes the list's lock in it before the import
 * row is inserted, and that transaction is the one that applies the import and marks it completed
 * (see `transaction`): the lock is held until then. It is a transaction lock taken through
 * accountXactLock, on the node of the account's shards, so that holders connected to any node of a
 * Citus cluster (API replicas, the admin CLI) exclude each other. The row is inserted through the
 * pool, committed at once, so the 'importing' row is visible to everyone while it runs; a second
 * import fails fast (409, never waits), and a row still 'importing' when the lock is free belongs to
 * a process that died (its connection closed, which ended the transaction and freed the lock): it
 * is marked failed before the new import starts. The partial unique index on importing rows backs
 * this up, and the final update of the row (finishImport) completes only a row still 'importing'.
 *
 * `run` gets the connection, in that open transaction, and the import id; it must apply
 * everything with `transaction`, which commits. When it throws, the transaction is rolled back and
 * the import is marked failed.
 */
export async function holdList<T>(
  sql: Sql,
  job: HeldImport,
  run: (conn: Conn, importId: string, holder: Holder) => Promise<T>,
): Promise<T> {
  const conn = (await sql.reserve()) as Conn;
  let gone = false;
  try {
    await conn`begin`;
    const [backend] = await conn<{ pid: number }[]>`select pg_backend_pid() as pid`;
    const holder = new Holder(sql, backend!.pid);
    if (!(await tryAccountXactLock(conn, job.accountId, lockKey(conn, job)))) throw await busy(conn, job);
    await sql`
      update suppression_imports
      set status = 'failed', failure_reason = ${INTERRUPTED}, completed_at = statement_timestamp()
      where account_id = ${job.accountId} and list_id = ${job.listId} and status = 'importing'`;
    const [row] = await sql<{ id: string }[]>`
      insert into suppression_imports (account_id, list_id, status, method, estimated_end)
      values (${job.accountId}, ${job.listId}, 'importing', ${job.method},
              statement_timestamp() + make_interval(secs => ${job.estimatedSeconds}))
      returning id`.catch(async (error) => {
      // Only a writer that bypasses the lock could get here; it is the same conflict.
      if (violates(error, 'suppression_imports_one_running')) throw await busy(conn, job);
      throw error;
    });
    const importId = row!.id;
    try {
      return await run(conn, importId, holder);
    } catch (error) {
      gone = isConnectionGone(error);
      // Rolled back first: this transaction may hold the import row's lock (a failure after
      // finishImport), which the update below would wait for. A session that died ended it already.
      if (!gone) await conn`rollback`.catch(() => {});
      await sql`
        update suppression_imports
        set status = 'failed', failure_reason = ${job.describeFailure(error)}, completed_at = statement_timestamp()
        where account_id = ${job.accountId} and id = ${importId} and status = 'importing'`.catch(() => {});
      throw error;
    }
  } catch (error) {
    gone ||= isConnectionGone(error);
    throw error;
  } finally {
    // postgres.js hangs a query sent on a reserved connection that closed, and releasing one puts a
    // dead connection in the pool; left alone, the pool reconnects it when needed. A transaction
    // still open (the list busy, or a failure before the import started) lets go of the list here.
    if (!gone) {
      await conn`rollback`.catch(() => {});
      conn.release();
    }
  }
}

/** The session holding the list, for a holder that goes without the database for a while. */
export class Holder {
  constructor(
    private readonly sql: Sql,
    readonly pid: number,
  ) {}

  /**
   * Throws a connection error when the holder's backend is gone. postgres.js hangs a query sent on a
   * reserved connection that closed while idle, so a long phase away from the database (reading and
   * sorting a file) ends with this check, through the pool, before the connection is used again.
   */
  async assertAlive(): Promise<void> {
    const [row] = await this.sql`select 1 from pg_stat_activity where pid = ${this.pid}`;
    if (!row)
      throw Object.assign(new Error('the database connection of the import closed'), { code: 'CONNECTION_CLOSED' });
  }
}

/** The list's lock. */
function lockKey(conn: Conn, job: HeldImport) {
  return suppressionListLock(conn, job.accountId, job.listId);
}

async function busy(conn: Conn, job: HeldImport) {
  const [running] = await conn<{ id: string; method: string; seconds: number }[]>`
    select id, method, greatest(1, ceil(extract(epoch from estimated_end - clock_timestamp())))::int as seconds
    from suppression_imports
    where account_id = ${job.accountId} and list_id = ${job.listId} and status = 'importing'`;
  const what = running ? `import ${running.id} (${running.method})` : 'another import';
  return operationInProgress(
    `Suppression list ${job.listId} is running ${what}; a list takes one import at a time. Retry when it has finished.`,
    running?.seconds ?? 1,
  );
}

/**
 * The apply of a held import (holdList): runs `fn` in the holding transaction and commits it,
 * which lets go of the list; rolls back when `fn` throws.
 */
export async function transaction<T>(conn: Conn, fn: () => Promise<T>): Promise<T> {
  try {
    const result = await fn();
    await conn`commit`;
    return result;
  } catch (error) {
    if (!isConnectionGone(error)) await conn`rollback`.catch(() => {});
    throw error;
  }
}

/**
 * The list's counter and the import's final counts, inside the caller's transaction. The list's
 * `updatedAt` moves only when something was added.
 */
export async function finishImport(
  conn: Conn,
  c: {
    accountId: string;
    listId: string;
    importId: string;
    totalCount: number;
    addedCount: number;
    malformedCount: number;
  },
): Promise<void> {
  if (c.addedCount > 0) {
    await conn`
      update suppression_lists set record_count = record_count + ${c.addedCount}, updated_at = statement_timestamp()
      where account_id = ${c.accountId} and id = ${c.listId}`;
  }
  const done = await conn`
    update suppression_imports
    set status = 'completed', total_count = ${c.totalCount}, added_count = ${c.addedCount},
        duplicate_count = ${c.totalCount - c.addedCount}, malformed_count = ${c.malformedCount},
        completed_at = statement_timestamp(), estimated_end = null
    where account_id = ${c.accountId} and id = ${c.importId} and status = 'importing'`;
  // Marked failed meanwhile: only when the holding transaction was lost and another import took
  // the list. Nothing of this one may commit: the caller's transaction rolls back.
  if (done.count === 0)
    throw operationInProgress(
      `Suppression list ${c.listId} was taken by another import before import ${c.importId} finished; ` +
        'nothing of it was applied. Retry when the other import has finished.',
      1,
    );
}

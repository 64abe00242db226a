import type { ReservedSql } from 'postgres';
import type { Sql } from '../../db';
import { violates } from '../../db-constraint';
import { isConnectionGone } from '../../db-unavailable';
import { operationInProgress } from '../../errors';
import { suppressionListLock } from '../../locks';

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
 * The holder keeps a session advisory lock on its own reserved connection from before its import
 * row is inserted until after the row is final. So the 'importing' row is visible to everyone while
 * it runs, a second import fails fast (409, never waits), and a row still 'importing' when the lock
 * is free belongs to a process that died (its connection closed, which frees the lock): it is marked
 * failed before the new import starts. The partial unique index on importing rows backs this up.
 *
 * `run` gets the connection and the import id and must apply everything in one transaction that
 * also marks the import completed (see `transaction`); when it throws, the import is marked failed.
 */
export async function holdList<T>(
  sql: Sql,
  job: HeldImport,
  run: (conn: Conn, importId: string, holder: Holder) => Promise<T>,
): Promise<T> {
  const conn = (await sql.reserve()) as Conn;
  let locked = false;
  let gone = false;
  try {
    const [lock] = await conn<
      { locked: boolean; pid: number }[]
    >`select pg_try_advisory_lock(${lockKey(conn, job)}) as locked, pg_backend_pid() as pid`;
    locked = lock!.locked;
    const holder = new Holder(sql, lock!.pid);
    if (!locked) throw await busy(conn, job);
    await conn`
      update suppression_imports
      set status = 'failed', failure_reason = ${INTERRUPTED}, completed_at = statement_timestamp()
      where account_id = ${job.accountId} and list_id = ${job.listId} and status = 'importing'`;
    const [row] = await conn<{ id: string }[]>`
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
      // A session that died has let go of the list already; its row is then marked through the pool.
      await (gone ? sql : conn)`
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
    // dead connection in the pool; left alone, the pool reconnects it when needed.
    if (!gone) {
      if (locked) await conn`select pg_advisory_unlock(${lockKey(conn, job)})`.catch(() => {});
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

/** begin … commit on a reserved connection (postgres.js only offers sql.begin on the pool). */
export async function transaction<T>(conn: Conn, fn: () => Promise<T>): Promise<T> {
  await conn`begin`;
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
  await conn`
    update suppression_imports
    set status = 'completed', total_count = ${c.totalCount}, added_count = ${c.addedCount},
        duplicate_count = ${c.totalCount - c.addedCount}, malformed_count = ${c.malformedCount},
        completed_at = statement_timestamp(), estimated_end = null
    where account_id = ${c.accountId} and id = ${c.importId}`;
}

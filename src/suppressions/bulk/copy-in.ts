import type { PendingQuery, Row } from 'postgres';
import { pipeline } from 'node:stream/promises';
import type { Sql } from '../../db';
import type { Conn } from './list-guard';

/**
 * Streams `source` into a `copy … from stdin` on a reserved connection, with backpressure
 * (pipeline), inside or outside a transaction, and settles however the COPY ends.
 *
 * The trap: once the last chunk is out, postgres.js detaches the stream and settles it only on
 * CommandComplete. If the server refuses the data instead (a duplicate key) or the connection
 * closes, the stream never settles and a plain pipeline waits forever. So the backend is watched
 * through the pool meanwhile: a COPY in progress is `active`; a backend that has gone, or has been
 * idle on two looks in a row, means the COPY is over without success. A source that fails makes
 * postgres.js send CopyFail. Either way the caller's transaction, if any, rolls back as usual.
 */
export async function copyInto(
  sql: Sql,
  conn: Conn,
  query: PendingQuery<Row[]>,
  source: AsyncIterable<Buffer>,
  onAbort: () => void = () => {},
): Promise<void> {
  const [{ pid } = { pid: 0 }] = await conn<{ pid: number }[]>`select pg_backend_pid() as pid`;
  const copy = await query.writable();
  const copying = pipeline(source, copy);
  copying.catch(() => {}); // settled through the race below
  const watch = new AbortController();
  try {
    await Promise.race([copying, copyEnded(sql, pid, watch.signal)]);
  } catch (error) {
    onAbort();
    throw error;
  } finally {
    watch.abort();
  }
}

/** Rejects once the backend `pid` is gone or no longer running its COPY (looked at twice a second). */
function copyEnded(sql: Sql, pid: number, stop: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    let idleLooks = 0;
    const timer = setInterval(async () => {
      const rows = await sql<{ state: string }[]>`select state from pg_stat_activity where pid = ${pid}`.catch(
        () => undefined,
      );
      if (stop.aborted || rows === undefined) return;
      const gone = rows.length === 0;
      idleLooks = !gone && rows[0]!.state !== 'active' ? idleLooks + 1 : 0;
      if (gone || idleLooks >= 2) {
        clearInterval(timer);
        const error = gone
          ? Object.assign(new Error('the database connection of the import closed'), { code: 'CONNECTION_CLOSED' })
          : new Error('the database refused the records being copied (the COPY ended without completing)');
        reject(error);
      }
    }, 500);
    stop.addEventListener('abort', () => clearInterval(timer), { once: true });
  });
}

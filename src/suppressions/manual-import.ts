import { createReadStream } from 'node:fs';
import { access, constants, stat } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import type { Sql } from '../db';
import { finishImport } from './add-records';
import { findList } from './lists';
import { holdList, isConnectionGone, transaction, type Conn } from './list-guard';
import { copyRows, STAGING, type LineCounts } from './record-lines';
import type { ListFormat } from './records';

export interface ManualImportResult {
  id: string;
  totalCount: number;
  addedCount: number;
  duplicateCount: number;
  malformedCount: number;
}

// Measured by bench/suppression-import.ts (10M md5 lines, 2 cores); only feeds Retry-After.
const READ_BYTES_PER_SECOND = 40_000_000;
const MERGE_ROWS_PER_SECOND = 400_000;

/**
 * A `manual` import of a local file into a list: one record per line (or a CSV whose first column
 * holds it), blank lines skipped, lines that are not a record of the list's format counted as
 * malformed. `totalCount` is the number of valid records read; `duplicateCount` those already on
 * the list or repeated in the file.
 *
 * The list is held while it runs (its import row is 'importing'). The file streams through COPY
 * into a temp table on the holder's connection, outside any transaction; one transaction then
 * inserts set-based, bumps the list's counter and completes the import, so a failure at any point
 * leaves the list as it was and the import `failed`.
 */
export async function runManualSuppressionImport(
  sql: Sql,
  { accountId, listId, file, log }: { accountId: string; listId: string; file: string; log?: (message: string) => void },
): Promise<ManualImportResult> {
  const started = performance.now();
  const elapsed = () => `${((performance.now() - started) / 1000).toFixed(1)} s`;
  const list = await findList(sql, accountId, listId);
  const size = await readableFileSize(file);
  return holdList(
    sql,
    {
      accountId,
      listId,
      method: 'manual',
      estimatedSeconds: Math.ceil(size / READ_BYTES_PER_SECOND + size / 40 / MERGE_ROWS_PER_SECOND) + 1,
      describeFailure: (error) => `The import stopped and nothing was applied: ${error instanceof Error ? error.message : String(error)}`,
    },
    async (conn, importId) => {
      const dropStaging = () => conn`drop table if exists pg_temp.suppression_import_staging`;
      try {
        const counts = await stage(sql, conn, list.format, file);
        log?.(`staged ${counts.valid} records (${counts.malformed} malformed) at ${elapsed()}`);
        await conn`
          update suppression_imports
          set estimated_end = clock_timestamp() + make_interval(secs => ${Math.ceil(counts.valid / MERGE_ROWS_PER_SECOND) + 1})
          where account_id = ${accountId} and id = ${importId}`;
        const added = await transaction(conn, () => merge(conn, list.format, { accountId, listId, importId, counts }));
        log?.(`merged ${added} new records at ${elapsed()}`);
        await dropStaging();
        return { id: importId, totalCount: counts.valid, addedCount: added, duplicateCount: counts.valid - added, malformedCount: counts.malformed };
      } catch (error) {
        if (!isConnectionGone(error)) await dropStaging().catch(() => {});
        throw error;
      }
    },
  );
}

/** The file cannot be read (missing, a directory, no permission): nothing was started. */
export class UnreadableFileError extends Error {}

async function readableFileSize(file: string): Promise<number> {
  try {
    await access(file, constants.R_OK);
    const s = await stat(file);
    // Pipes are fine (`--file <(zcat list.gz)`); their size is unknown, so the estimate is short.
    if (s.isDirectory()) throw new Error('it is a directory');
    return s.size;
  } catch (error) {
    throw new UnreadableFileError(`cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/** Streams the file's records into a temp table with COPY (backpressure through pipeline). */
async function stage(sql: Sql, conn: Conn, format: ListFormat, file: string): Promise<LineCounts> {
  // A temp table: private to this connection, never WAL-logged, gone with the session.
  await conn`drop table if exists pg_temp.suppression_import_staging`;
  await conn`create temp table suppression_import_staging (v ${conn.unsafe(STAGING[format].type)} not null)`;
  const [{ pid } = { pid: 0 }] = await conn<{ pid: number }[]>`select pg_backend_pid() as pid`;
  const counts: LineCounts = { valid: 0, malformed: 0 };
  const copy = await conn`copy suppression_import_staging (v) from stdin`.writable();
  const source = createReadStream(file, { highWaterMark: 1 << 20 });
  const copying = pipeline(source, copyRows(format, counts), copy);
  copying.catch(() => {}); // settled through the race below
  const watch = new AbortController();
  try {
    await Promise.race([copying, backendGone(sql, pid, watch.signal)]);
  } catch (error) {
    source.destroy();
    throw error;
  } finally {
    watch.abort();
  }
  // Temp tables get no autovacuum statistics; the planner needs them to size the sort.
  await conn`analyze suppression_import_staging`;
  return counts;
}

/**
 * Rejects once the backend of the COPY is gone. postgres.js never settles a COPY stream whose
 * connection closes after the last chunk was sent (the CopyDone is out, the stream already
 * detached), so the pipeline alone could wait forever.
 */
function backendGone(sql: Sql, pid: number, stop: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const timer = setInterval(async () => {
      const rows = await sql`select 1 from pg_stat_activity where pid = ${pid}`.catch(() => [1]);
      if (rows.length === 0 && !stop.aborted) {
        clearInterval(timer);
        reject(Object.assign(new Error('the database connection of the import closed'), { code: 'CONNECTION_CLOSED' }));
      }
    }, 1000);
    stop.addEventListener('abort', () => clearInterval(timer), { once: true });
  });
}

/**
 * Inserts the distinct staged records, sorted, so the primary key's B-tree fills in key order
 * rather than at random. Into an empty list a plain insert is enough (nobody else writes the list
 * while it is held); otherwise on conflict do nothing skips records already there.
 */
async function merge(conn: Conn, format: ListFormat, c: { accountId: string; listId: string; importId: string; counts: LineCounts }): Promise<number> {
  await conn`set local work_mem = '1GB'`;
  const value = STAGING[format].type === 'uuid' ? conn`uuid_send(v)` : conn`v`;
  const [existing] = await conn`select 1 from suppression_records where account_id = ${c.accountId} and list_id = ${c.listId} limit 1`;
  const conflict = existing ? conn`on conflict do nothing` : conn``;
  const inserted = await conn`
    insert into suppression_records (account_id, list_id, value)
    select ${c.accountId}, ${c.listId}, ${value} from (select distinct v from suppression_import_staging) s order by v
    ${conflict}`;
  await finishImport(conn, { accountId: c.accountId, listId: c.listId, importId: c.importId, totalCount: c.counts.valid, addedCount: inserted.count, malformedCount: c.counts.malformed });
  return inserted.count;
}

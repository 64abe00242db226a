import { createReadStream } from 'node:fs';
import { access, constants, stat } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { type Sql, isConnectionGone } from '../../db';
import { BucketSort } from './bucket-sort';
import { copyInto } from './copy-in';
import { findList } from '../lists';
import { finishImport, holdList, transaction, type Conn, type Holder } from './list-guard';
import { copyFraming, recordRows, type LineCounts } from './record-lines';
import type { ListFormat } from '../records';

export interface ManualImportResult {
  id: string;
  totalCount: number;
  addedCount: number;
  duplicateCount: number;
  malformedCount: number;
}

// Rough rates on a loaded 2-core machine (bench/steps/suppression-import.ts); they only feed Retry-After.
const READ_BYTES_PER_SECOND = 50_000_000;
const WRITE_ROWS_PER_SECOND = 300_000;
const DIGEST_BYTES: Partial<Record<ListFormat, number>> = { md5: 16, sha512: 64 };

/** The file cannot be read (missing, a directory, no permission): nothing was started. */
export class UnreadableFileError extends Error {}

interface Job {
  accountId: string;
  listId: string;
  importId: string;
  format: ListFormat;
  file: string;
  holder: Holder;
  log: (message: string) => void;
}

/**
 * A `manual` import of a local file into a list: one record per line (or a CSV whose first column
 * holds it), blank lines skipped, lines that are not a record of the list's format counted as
 * malformed. `totalCount` is the number of valid records read; `duplicateCount` those already on
 * the list or repeated in the file.
 *
 * The list is held while it runs (its import row is 'importing'). Everything is applied by one
 * transaction that also completes the import, so a failure at any point leaves the list as it was
 * and the import `failed`.
 *
 * Digests (md5, sha512) are sorted and de-duplicated beside the database (BucketSort); into an
 * empty list they then go straight in by COPY, the fastest way PostgreSQL has to fill a table and
 * its index. Otherwise records are staged by COPY in a temp table and inserted set-based, sorted,
 * minus those already on the list.
 */
export async function runManualSuppressionImport(
  sql: Sql,
  {
    accountId,
    listId,
    file,
    log = () => {},
  }: { accountId: string; listId: string; file: string; log?: (message: string) => void },
): Promise<ManualImportResult> {
  // One connection holds the list; the pool's others check on it while it copies.
  if (sql.options.max < 2) throw new Error('runManualSuppressionImport needs a connection pool of at least 2');
  const started = performance.now();
  const at = () => `${((performance.now() - started) / 1000).toFixed(1)} s`;
  const list = await findList(sql, accountId, listId);
  const size = await readableFileSize(file);
  const perLine = DIGEST_BYTES[list.format] ? DIGEST_BYTES[list.format]! * 2 + 1 : 30;
  return holdList(
    sql,
    {
      accountId,
      listId,
      method: 'manual',
      estimatedSeconds: Math.ceil(size / READ_BYTES_PER_SECOND + size / perLine / WRITE_ROWS_PER_SECOND) + 1,
      describeFailure: (error) =>
        `The import stopped and nothing was applied: ${error instanceof Error ? error.message : String(error)}`,
    },
    async (conn, importId, holder) => {
      const job: Job = {
        accountId,
        listId,
        importId,
        format: list.format,
        file,
        holder,
        log: (m) => log(`${m} at ${at()}`),
      };
      const dropStaging = () => conn`drop table if exists pg_temp.suppression_import_staging`;
      try {
        const { counts, added } = DIGEST_BYTES[list.format]
          ? await importDigests(sql, conn, job)
          : await importStaged(sql, conn, job);
        await dropStaging();
        return {
          id: importId,
          totalCount: counts.valid,
          addedCount: added,
          duplicateCount: counts.valid - added,
          malformedCount: counts.malformed,
        };
      } catch (error) {
        // A connection that died took its temp table with it (and cannot be queried any more).
        if (!isConnectionGone(error)) await dropStaging().catch(() => {});
        throw error;
      }
    },
  );
}

async function readableFileSize(file: string): Promise<number> {
  try {
    await access(file, constants.R_OK);
    const s = await stat(file);
    // Pipes are fine (`--file <(zcat list.gz)`); their size is unknown, so the estimate is short.
    if (s.isDirectory()) throw new Error('it is a directory');
    return s.size;
  } catch (error) {
    throw new UnreadableFileError(`cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
}

const readFile = (file: string) => createReadStream(file, { highWaterMark: 1 << 20 });

/** md5 and sha512: sort and de-duplicate the file beside the database, then write. */
async function importDigests(sql: Sql, conn: Conn, job: Job): Promise<{ counts: LineCounts; added: number }> {
  const length = DIGEST_BYTES[job.format]!;
  const sorter = await BucketSort.open(length);
  try {
    const counts: LineCounts = { valid: 0, malformed: 0 };
    await pipeline(readFile(job.file), recordRows(job.format, counts), sorter.writable());
    job.log(`read ${counts.valid} records (${counts.malformed} malformed)`);
    await job.holder.assertAlive();
    await refineEstimate(conn, job, counts.valid);
    if (!(await listHasRecords(conn, job))) {
      // Nothing to compare with: the distinct records all go in, by COPY, in key order.
      const prefix = tuplePrefix(job, length);
      const added = await transaction(conn, async () => {
        await copyInto(
          sql,
          conn,
          conn`copy suppression_records (account_id, list_id, value) from stdin (format binary)`,
          copyFraming(sorter.sorted(prefix)),
        );
        await finishImport(conn, {
          ...job,
          totalCount: counts.valid,
          addedCount: sorter.distinct,
          malformedCount: counts.malformed,
        });
        return sorter.distinct;
      });
      job.log(`wrote ${added} records`);
      return { counts, added };
    }
    await createStaging(conn);
    await copyInto(
      sql,
      conn,
      conn`copy suppression_import_staging (v) from stdin (format binary)`,
      copyFraming(sorter.sorted(stagingPrefix(length))),
    );
    job.log(`staged ${sorter.distinct} distinct records`);
    return { counts, added: await mergeStaging(conn, job, counts, { sortedDistinct: true }) };
  } finally {
    await sorter.close();
  }
}

/** Plain text: stage every valid record, then insert the distinct new ones in one statement. */
async function importStaged(sql: Sql, conn: Conn, job: Job): Promise<{ counts: LineCounts; added: number }> {
  const counts: LineCounts = { valid: 0, malformed: 0 };
  await createStaging(conn);
  const file = readFile(job.file);
  const rows = copyFraming(recordRows(job.format, counts)(file));
  await copyInto(sql, conn, conn`copy suppression_import_staging (v) from stdin (format binary)`, rows, () =>
    file.destroy(),
  );
  job.log(`staged ${counts.valid} records (${counts.malformed} malformed)`);
  await refineEstimate(conn, job, counts.valid);
  return { counts, added: await mergeStaging(conn, job, counts, { sortedDistinct: false }) };
}

async function listHasRecords(conn: Conn, job: Job): Promise<boolean> {
  const [row] = await conn`
      select 1 from suppression_records where account_id = ${job.accountId} and list_id = ${job.listId} limit 1`;
  return row !== undefined;
}

async function refineEstimate(conn: Conn, job: Job, records: number): Promise<void> {
  await conn`
    update suppression_imports
    set estimated_end = statement_timestamp() + make_interval(secs => ${Math.ceil(records / WRITE_ROWS_PER_SECOND) + 1})
    where account_id = ${job.accountId} and id = ${job.importId}`;
}

/** A temp table: private to this connection, never WAL-logged, gone with the session. */
async function createStaging(conn: Conn): Promise<void> {
  await conn`drop table if exists pg_temp.suppression_import_staging`;
  await conn`create temp table suppression_import_staging (v bytea not null)`;
}

/** (account_id uuid, list_id uuid, value bytea) before each value of a suppression_records tuple. */
function tuplePrefix(job: Job, length: number): Buffer {
  const p = Buffer.alloc(46);
  p.writeInt16BE(3, 0);
  p.writeInt32BE(16, 2);
  Buffer.from(job.accountId.replaceAll('-', ''), 'hex').copy(p, 6);
  p.writeInt32BE(16, 22);
  Buffer.from(job.listId.replaceAll('-', ''), 'hex').copy(p, 26);
  p.writeInt32BE(length, 42);
  return p;
}

function stagingPrefix(length: number): Buffer {
  const p = Buffer.alloc(6);
  p.writeInt16BE(1, 0);
  p.writeInt32BE(length, 2);
  return p;
}

/**
 * In one transaction: inserts the distinct staged records that are not on the list yet, sorted,
 * so the primary key's B-tree fills in key order rather than at random (per-row index upkeep is
 * the bulk of the cost). Nobody else writes the list while it is held, so an anti-join replaces
 * on conflict do nothing, whose speculative insertion made re-importing 10M records three times
 * slower. Then the counters, and the import completed.
 */
async function mergeStaging(
  conn: Conn,
  job: Job,
  counts: LineCounts,
  staged: { sortedDistinct: boolean },
): Promise<number> {
  // Analyzed, a temp table tells the planner its size (autovacuum never looks at temp tables).
  await conn`analyze suppression_import_staging`;
  const added = await transaction(conn, async () => {
    await conn`set local work_mem = '1GB'`;
    const [list] = await conn<
      { n: number }[]
    >`select record_count as n from suppression_lists where account_id = ${job.accountId} and id = ${job.listId}`;
    // The join comes from counts we keep, not from table statistics, which lag behind a large
    // import: a merge of the sorted file with the list's index order when the file is a sizeable
    // share of the list (10M against 10M: 13 s, where a hash took 19 s and index probes longer),
    // index probes when the file is small next to the list.
    if (counts.valid * 4 >= (list?.n ?? 0))
      await conn`set local enable_nestloop = off; set local enable_hashjoin = off`.simple();
    else await conn`set local enable_hashjoin = off; set local enable_mergejoin = off`.simple();
    const records = staged.sortedDistinct
      ? conn`suppression_import_staging`
      : conn`(select distinct v from suppression_import_staging)`;
    // On a Citus cluster the staged records (a temp table, on the coordinator) cannot be joined with
    // the list's shards: ON CONFLICT DO NOTHING keeps the records already on the list out there.
    const [{ distributed } = { distributed: false }] = await conn<{ distributed: boolean }[]>`
      select is_distributed('suppression_records') as distributed`;
    const notOnList =
      !distributed && (await listHasRecords(conn, job))
        ? conn`where not exists (
          select 1 from suppression_records r
          where r.account_id = ${job.accountId} and r.list_id = ${job.listId} and r.value = s.v)`
        : conn``;
    // There the statement's row count is the rows it offered, not those it added: the list's own
    // count before and after tells (nobody else writes the list while it is held).
    const onList = async () => {
      const [r] = await conn<{ n: number }[]>`
        select count(*)::int8 as n from suppression_records
        where account_id = ${job.accountId} and list_id = ${job.listId}`;
      return Number(r!.n);
    };
    const before = distributed ? await onList() : 0;
    const inserted = await conn`
      insert into suppression_records (account_id, list_id, value)
      select ${job.accountId}, ${job.listId}, s.v from ${records} s
      ${notOnList}
      order by s.v
      ${distributed ? conn`on conflict do nothing` : conn``}`;
    const addedCount = distributed ? (await onList()) - before : inserted.count;
    await finishImport(conn, { ...job, totalCount: counts.valid, addedCount, malformedCount: counts.malformed });
    return addedCount;
  });
  job.log(`inserted ${added} new records`);
  return added;
}

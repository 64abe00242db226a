import type { Readable } from 'node:stream';
import { pinEtag, readDone, startRead } from '../../src/imports/lifecycle';
import { importReadRest, importRowsRead } from '../../src/metrics/import-pipeline';
import { ObjectChangedError, type ObjectStore } from '../../src/storage/store';
import { RowReader } from './cells';
import { headerMismatch, loadBrands, loadColumns } from './columns';
import { CopySink } from './copy-sink';
import { parseCsv, utf8Text } from './csv';
import { decompressed } from './decompress';
import { HeapGuard } from './heap-guard';
import { Pacer } from './pace';
import { ensureRejectsTable, forgetRead, RejectWriter } from './rejects';
import { expectedRows, RepeatFilter, repeatsTableDdl } from './repeats';
import {
  accountLiteral,
  createTables,
  discardTables,
  rowsTableDdl,
  stagedRowTables,
  stagingSlices,
  useSessionAccount,
  SESSION_ACCOUNT,
} from './staging';
import { ImportFileError } from './errors';
import { type Pipeline, type Step } from './state';

/**
 * A row can hold at most this much text (per column, at least 1 MB in all). An importable cell is
 * at most 255 characters (about 520 with every character a doubled quote), so no importable row
 * comes near it; past it the file is broken (see parseCsv).
 */
const MAX_CHARS_PER_COLUMN = 1024;
const MAX_ROW_CHARS = 1 << 20;
/**
 * A repeats filter this big or bigger holds off the GC's full collections (heap-guard.ts); the read
 * then collects at every HEAP_GROWTH of heap. Below it (files up to ~3M rows) the GC does well alone.
 */
const GUARDED_FILTER_BYTES = 8 << 20;
const HEAP_GROWTH = 24 << 20;

/**
 * Phase 1, read: stream the pinned object (gunzipped when it is gzip) through papaparse, validate
 * and normalise every row in the worker, COPY the good ones into the UNLOGGED staging table, count
 * the malformed ones. Returns dedupe as the next phase.
 *
 * With the rejected-rows report on, it also records why each malformed row was refused, which
 * emails may occur more than once (repeats.ts: the dedupe phase finds the duplicate rows among them),
 * and what the report needs to find the rows in the file again (readDone's file facts; report.ts).
 *
 * Restart-safe by starting over: the staging tables are made anew first, what an earlier read
 * recorded is forgotten, and the malformed count is kept in memory and committed only together
 * with the move to `dedupe` (readDone), so a read killed half way leaves nothing that a second read
 * could count twice.
 */
export async function readPhase(p: Pipeline): Promise<Step> {
  const { sql, conn, store, job } = p;
  // Not taken: the import was cancelled or failed since this run loaded it.
  if (!(await startRead(sql, job.accountId, job.id))) return { phase: 'stopped' };
  const etag = await pinnedEtag(p);

  const columns = await loadColumns(sql, job);
  const brands = await loadBrands(sql, job.accountId);
  const reader = new RowReader(columns, brands, job.brandIds);
  const maxRowChars = Math.max(MAX_ROW_CHARS, columns.length * MAX_CHARS_PER_COLUMN);

  // A read again for a merge under way (its staging was lost) keeps the decision of the first read:
  // the merge's committed batches recorded their skipped rows, or did not.
  const report = job.rowCount !== null ? job.rejectsRecorded : p.report;
  // For the log: the phase's time and the worker process's CPU in it (other imports' too, if any run).
  const started = performance.now();
  const cpu = process.cpuUsage();
  const s = p.staging;
  const t = s.tables;
  // Made anew: an earlier read of this import may have left rows behind (and a merge table built from them).
  await discardTables(conn, s, stagedRowTables(t));
  // One table on a cluster, where each slice would be a distributed table of its own, 32 shards more;
  // in slices by email_md5 for a big file on one PostgreSQL, so that dedupe sorts each in memory.
  const slices = s.pooled ? 1 : stagingSlices(Number(job.objectSize ?? 0));
  const account = s.pooled ? SESSION_ACCOUNT : accountLiteral(job.accountId);
  if (s.pooled) await useSessionAccount(conn, job.accountId);
  // The repeats table is filled only with the report on; the rejects table always exists (the
  // merge's statements name it).
  await createTables(conn, s, [
    ...rowsTableDdl(t.rows, account, slices),
    ...(report ? [repeatsTableDdl(t.repeats)] : []),
  ]);
  await ensureRejectsTable(conn, s, job.accountId);
  await forgetRead(sql, t.rejects, job.accountId);
  const rejects = report ? new RejectWriter(sql, t.rejects, job.accountId) : undefined;
  // Made at the first chunk, sized from its rows (expectedRows).
  let repeats: RepeatFilter | undefined;
  let heap: HeapGuard | undefined;
  let gzip = false;

  const source = await openObject(store, job.objectKey!, etag);
  const text = utf8Text(decompressed(source, undefined, (g) => (gzip = g)));
  const sink = new CopySink(conn, t.rows, p.batchSize);
  let headerSeen = false;
  let rowNo = 0;
  let malformed = 0;
  let counted = 0; // rows already in the import_rows_read metric
  let fileRows = 0; // every row papaparse gave, blank lines and the header too (see report.ts)
  let linebreak = '\n';
  // While the API is busy, a parsed chunk and its COPY are one piece, rested after (pace.ts); the
  // piece began when the stream last went on (papaparse parses a chunk before it hands it over).
  const pacer = new Pacer(p);
  let pieceStarted = performance.now();
  try {
    await parseCsv(text, (rows, flagged, unparsed, newline, parsed) => {
      if (report && !repeats) {
        const size = Number(job.objectSize ?? 0);
        repeats = new RepeatFilter(sql, t.repeats, job.accountId, expectedRows(size, gzip, rows.length, parsed));
        if (repeats.bytes >= GUARDED_FILTER_BYTES) heap = new HeapGuard(HEAP_GROWTH);
      }
      fileRows += rows.length;
      linebreak = newline;
      for (let i = 0; i < rows.length; i++) {
        const cells = rows[i]!;
        if (cells.length === 1 && cells[0]!.trim() === '') continue; // a blank line is not a row
        if (!headerSeen) {
          const why = headerMismatch(cells, columns);
          if (why) throw new ImportFileError(why);
          headerSeen = true;
          continue;
        }
        rowNo++;
        const bad = flagged?.has(i);
        const row = bad ? undefined : reader.read(rowNo, cells);
        if (row !== undefined) {
          sink.add(row);
          repeats?.add(row.md5);
          continue;
        }
        malformed++;
        if (!rejects) continue;
        if (bad) rejects.add(rowNo, 'bad_quote', -1);
        else
          rejects.add(rowNo, reader.reason, reader.column, reader.reason === 'wrong_field_count' ? cells.length : null);
      }
      importRowsRead.inc(rowNo - counted);
      counted = rowNo;
      heap?.check();
      if (unparsed > maxRowChars) {
        const where = headerSeen ? `Data row ${rowNo + 1}` : 'The header row';
        throw new ImportFileError(
          `${where} is not valid CSV: a quoted field is never closed, ` +
            `or the row is longer than ${maxRowChars} characters.`,
        );
      }
      if (!sink.ready || rejects?.queue.ready === false || repeats?.queue.ready === false) {
        text.pause();
        Promise.all([sink.whenReady(), rejects?.queue.whenReady(), repeats?.queue.whenReady()]).then(
          () => text.resume(),
          (e) => text.destroy(e),
        );
      } else if (pacer.busy()) {
        // The rest starts once PostgreSQL has taken the piece's rows: its COPY work is the piece's
        // too, and resting while it still ran would leave the API no core.
        text.pause();
        sink
          .flush()
          .then(() => pacer.restAfter(pieceStarted))
          .then(
            () => {
              pieceStarted = performance.now();
              text.resume();
            },
            (e) => text.destroy(e),
          );
        return;
      } else if (p.sharing?.()) {
        // Other imports of this worker wait for the event loop at each of their statements; a
        // stream in flowing mode hands over several chunks in one go (20-40 ms of parsing), which
        // made a 10-row import beside this read take 2-3 s. One chunk, then their turn.
        text.pause();
        setImmediate(() => text.resume());
      }
      pieceStarted = performance.now();
    });
    if (!headerSeen) throw new ImportFileError('The file is empty: it has no header row.');
    await sink.flush();
    await rejects?.close();
    await repeats?.close();
  } catch (e) {
    // Every stage, as a pipeline would: the object's file is closed, and no generator between
    // (gunzip, the decoder) is left suspended.
    text.destroy();
    source.destroy();
    await sink.abort();
    await rejects?.close().catch(() => {});
    await repeats?.close().catch(() => {});
    throw e;
  }

  const read = { malformed, staged: sink.rows, fileRows, linebreak, recorded: report };
  if (!(await readDone(sql, job.accountId, job.id, read))) return { phase: 'stopped' };
  importReadRest.inc(pacer.restedMs / 1000);
  const used = process.cpuUsage(cpu);
  p.log('import read', {
    importId: job.id,
    rows: rowNo,
    staged: sink.rows,
    malformed,
    repeats: repeats?.count,
    ms: Math.round(performance.now() - started),
    processCpuMs: Math.round((used.user + used.system) / 1000),
    // Paced (the API was busy): how many pieces, and how long the read rested between them.
    ...(pacer.pieces > 0 ? { pacedPieces: pacer.pieces, restedMs: pacer.restedMs } : {}),
  });
  return { phase: 'dedupe' };
}

/** The ETag the import reads; pinned at upload (or here, once), so a later PUT is never imported. */
async function pinnedEtag(p: Pipeline): Promise<string> {
  const { job } = p;
  if (!job.objectKey) throw new ImportFileError('No file was uploaded for this import.');
  if (job.objectEtag) return job.objectEtag;
  const info = await p.store.head(job.objectKey);
  if (!info) throw new ImportFileError('The uploaded file could not be found.');
  await pinEtag(p.sql, job.accountId, job.id, info.etag, info.size);
  return info.etag;
}

async function openObject(store: ObjectStore, key: string, etag: string): Promise<Readable> {
  try {
    return await store.read(key, etag);
  } catch (e) {
    // Gone or replaced is permanent; anything else (network, throttling) is for a retry.
    if (e instanceof ObjectChangedError)
      throw new ImportFileError('The uploaded file could not be read: it was removed or replaced after upload.', {
        cause: e,
      });
    throw e;
  }
}

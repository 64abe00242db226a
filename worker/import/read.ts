import type { Readable } from 'node:stream';
import { pinEtag, readDone, startRead } from '../../src/imports/lifecycle';
import { importRowsRead } from '../../src/metrics/import-pipeline';
import { ObjectChangedError, type ObjectStore } from '../../src/storage/store';
import { RowReader } from './cells';
import { headerMismatch, loadBrands, loadColumns } from './columns';
import { CopySink } from './copy-sink';
import { parseCsv, utf8Text } from './csv';
import { dropStaging, rowsTableDdl, stagingTables } from './staging';
import { ImportFileError, type Pipeline, type Step } from './state';

/**
 * A row can hold at most this much text (per column, at least 1 MB in all). An importable cell is
 * at most 255 characters (about 520 with every character a doubled quote), so no importable row
 * comes near it; past it the file is broken (see parseCsv).
 */
const MAX_CHARS_PER_COLUMN = 1024;
const MAX_ROW_CHARS = 1 << 20;

/**
 * Phase 1, read: stream the pinned object through papaparse, validate and normalise every row in
 * the worker, COPY the good ones into the UNLOGGED staging table, count the malformed ones.
 * Returns dedupe as the next phase.
 *
 * Restart-safe by starting over: the staging tables are made anew first, and the malformed count
 * is kept in memory and committed only together with the move to `dedupe` (readDone), so a read
 * killed half way leaves nothing that a second read could count twice.
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

  const t = stagingTables(job.id);
  // Made anew: an earlier read of this import may have left rows behind (and a merge table built from them).
  await dropStaging(conn, job.id);
  await conn.unsafe(rowsTableDdl(t.rows));

  const source = await openObject(store, job.objectKey!, etag);
  const text = utf8Text(source);
  const sink = new CopySink(conn, t.rows, p.batchSize);
  let headerSeen = false;
  let rowNo = 0;
  let malformed = 0;
  let counted = 0; // rows already in the import_rows_read metric
  try {
    await parseCsv(text, (rows, flagged, unparsed) => {
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
        const line = flagged?.has(i) ? undefined : reader.line(rowNo, cells);
        if (line === undefined) malformed++;
        else sink.add(line);
      }
      importRowsRead.inc(rowNo - counted);
      counted = rowNo;
      if (unparsed > maxRowChars) {
        const where = headerSeen ? `Data row ${rowNo + 1}` : 'The header row';
        throw new ImportFileError(
          `${where} is not valid CSV: a quoted field is never closed, ` +
            `or the row is longer than ${maxRowChars} characters.`,
        );
      }
      if (!sink.ready) {
        text.pause();
        sink.whenReady().then(
          () => text.resume(),
          (e) => text.destroy(e),
        );
      }
    });
    if (!headerSeen) throw new ImportFileError('The file is empty: it has no header row.');
    await sink.close();
  } catch (e) {
    source.destroy();
    await sink.abort();
    throw e;
  }

  if (!(await readDone(sql, job.accountId, job.id, { malformed, staged: sink.rows }))) return { phase: 'stopped' };
  p.log('import read', { importId: job.id, rows: rowNo, staged: sink.rows, malformed });
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

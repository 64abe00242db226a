import { createWriteStream, type WriteStream } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import Papa from 'papaparse';
import type { Sql } from '../../src/db';
import type { RejectedRowsReport } from '../../src/imports/lifecycle';
import { csvField, rejectionDetail, REPORT_COLUMNS, type Reason } from '../../src/imports/rejections';
import { rejectedRowsObjectKey } from '../../src/storage';
import type { Column } from './cells';
import { loadColumns } from './columns';
import { parseCsv, utf8Text } from './csv';
import { decompressed } from './decompress';
import { loadReportFacts, type DraftedReport, type Pipeline, type ReportFacts, type ReportFile } from './state';

/** One recorded rejected row (worker/import/rejects.ts). */
interface Rejected {
  row_no: string;
  reason: Reason;
  column_no: number | null;
  info: string | null;
}

/** Recorded rows read per page (worker/import/rejects.ts's table, in row order). */
const PAGE_ROWS = 2_000;
const FLUSH_CHARS = 256 * 1024;

/**
 * Writes the import's rejected-rows report into the object store, before the import is marked
 * `success`: a CSV with a line for every recorded rejected row, in file order. Its columns are the
 * row's number (data rows counted from 1, as in the import's counts), the reason code
 * (src/imports/rejections.ts), the column at fault, a human-readable detail, and then the row's
 * cells exactly as the file had them. Returns undefined when there is nothing to report (or the
 * report is off for this import).
 *
 * The cells come from the file, read once more. The rows table of the read phase holds only what
 * was staged, and staging every row's text for the few that are rejected cost more than reading
 * the file again (a COPY of the raw text with the staged rows took 25-50% longer). A file whose
 * rows are one line each (no quoted line break) is read without parsing: its lines are counted,
 * and a line is decoded only when its row is in the report. The read phase counted the rows the
 * parser gave (file_rows), so a file where the two differ (a quoted line break, a line ending the
 * parser read otherwise) is noticed at the end and read again through the parser: slower, exact.
 *
 * Memory stays flat: the recorded rows come in pages in file order (recordedPages), the report goes
 * to a temporary file, and the store takes that file. Idempotent: a run killed midway writes it again.
 */
export async function writeReport(p: Pipeline): Promise<RejectedRowsReport | undefined> {
  const { sql, job } = p;
  const draft = p.reportDraft;
  p.reportDraft = undefined;
  const facts = await loadReportFacts(sql, job);
  if (!facts.rejectsRecorded || !job.objectKey) {
    await draft?.discard();
    return undefined;
  }
  const lines = await recordedLines(p);
  const started = performance.now();
  // The draft, when the merge rejected no row of its own (its rows are all in the draft).
  const drafted = await draft?.take(lines);
  if (lines === 0) return undefined;
  const file = drafted ?? (await writtenFile(p, facts));
  try {
    const written = performance.now();
    const key = rejectedRowsObjectKey(job.accountId, job.id);
    await p.store.putFile(key, file.path);
    const ms = (t: number) => Math.round(t);
    p.log('import rejected-rows report written', {
      importId: job.id,
      lines,
      read: file.how,
      drafted: drafted !== undefined,
      writeMs: ms(written - started),
      storeMs: ms(performance.now() - written),
    });
    return { key, lines, retentionDays: p.reportRetentionDays };
  } finally {
    await rm(file.path, { force: true });
  }
}

/**
 * The report written ahead, while the merge runs, from the rows rejected before it (the read's and
 * dedupe's). Most imports reject no row in their merge (skipped or disabled rows come only with
 * `skip`, `keep` or disabled contacts), and then the finish only stores this file: the walk of the
 * file (0.2-0.3 s per 1M rows) is done while the merge's statements run in PostgreSQL, not after.
 * When the merge did reject rows, the finish writes the report anew. Never needed for correctness:
 * a draft that failed or does not match is dropped. It starts once `before` (the recording of the
 * duplicate rows, worker/import/duplicates.ts) has ended, so it holds every row rejected before the merge.
 */
export class ReportDraft implements DraftedReport {
  private readonly file: Promise<ReportFile | undefined>;
  private readonly abort = new AbortController();
  private taken = false;

  constructor(p: Pipeline, before: Promise<unknown> = Promise.resolve()) {
    // A failed `before` fails its phase, which says why: no draft then.
    const drafted = before.then(
      () => draft(p, this.abort.signal),
      () => undefined,
    );
    this.file = drafted.catch((e: unknown) => {
      if (this.abort.signal.aborted) p.log('import rejected-rows report draft stopped', { importId: p.job.id });
      else
        p.log('import rejected-rows report draft failed; the finish writes it', {
          importId: p.job.id,
          error: String(e),
        });
      return undefined;
    });
  }

  /** The draft's file when it holds exactly `lines` rows (then the caller removes it); else dropped. */
  async take(lines: number): Promise<ReportFile | undefined> {
    const file = await this.file;
    this.taken = true;
    if (file && file.lines === lines && lines > 0) return file;
    if (file) await rm(file.path, { force: true });
    return undefined;
  }

  /**
   * Stops the walk where it is (a run that gives way must not wait for a walk of the whole file, at
   * 25M rows some 10 s) and removes what it wrote.
   */
  async discard(): Promise<void> {
    if (this.taken) return;
    this.abort.abort();
    await this.take(-1);
  }
}

async function draft(p: Pipeline, signal: AbortSignal): Promise<ReportFile | undefined> {
  signal.throwIfAborted();
  const facts = await loadReportFacts(p.sql, p.job);
  // Nothing rejected before the merge: a walk of the whole file for no line.
  if (!facts.rejectsRecorded || !p.job.objectKey || (await recordedLines(p)) === 0) return undefined;
  return writtenFile(p, facts, signal);
}

async function recordedLines(p: Pipeline): Promise<number> {
  const table = p.staging.tables.rejects;
  const [{ n } = { n: 0 }] = await p.sql<{ n: string }[]>`
    select count(*) as n from ${p.sql(table)} where account_id = ${p.job.accountId}::uuid`;
  return Number(n);
}

/**
 * The report of the rows recorded now, written to a new temporary file (the caller removes it).
 * At the finish nothing records rows any more. A draft's pages may also hold rows a merge batch
 * recorded while it read; the merge only adds rows, so a draft with as many lines as the finish
 * counts holds exactly its rows (ReportDraft.take).
 */
async function writtenFile(p: Pipeline, facts: ReportFacts, signal?: AbortSignal): Promise<ReportFile> {
  const { sql, job } = p;
  const table = p.staging.tables.rejects;
  const columns = await loadColumns(sql, job);
  const path = join(tmpdir(), reportFileName(job.id));
  try {
    let how: ReportFile['how'] = 'lines';
    let lines = await writeFile(p, facts, columns, table, path, byLines, signal);
    if (lines === undefined) {
      how = 'parsed';
      lines = await writeFile(p, facts, columns, table, path, byParsing, signal);
      if (lines === undefined) throw new Error(`import ${job.id}: the file no longer holds the rows its read counted`);
    }
    return { path, lines, how };
  } catch (e) {
    await rm(path, { force: true });
    throw e;
  }
}

let files = 0;

/** A temporary report file's name: the import, the process that writes it (see removeStaleReportFiles), a count. */
const reportFileName = (importId: string) => `rejected-rows-${importId}-${process.pid}-${++files}.csv`;
const REPORT_FILE = /^rejected-rows-[0-9a-f-]{36}-(\d+)-\d+\.csv$/;

/**
 * Removes the temporary report files of worker processes that are gone. A draft lives for a whole
 * merge (up to ~100 MB at 25M rows), so a worker killed during merges would otherwise leave one
 * behind each time. A file of a live process (this one, or another worker on the machine) stays.
 * Returns the names removed.
 */
export async function removeStaleReportFiles(dir = tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const pid = Number(REPORT_FILE.exec(name)?.[1] ?? NaN);
    if (!Number.isInteger(pid) || pid === process.pid || alive(pid)) continue;
    await rm(join(dir, name), { force: true });
    removed.push(name);
  }
  return removed;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'; // alive, another user's
  }
}

/**
 * The walk reads the file in chunks this big where the store lets it choose (the local store).
 * Measured on file A at 1M rows (187 MB, 1.5 % of its rows wanted): with 64 KB chunks the walk took
 * 0.24 s and 0.28 s of CPU, most of it the stream's own work per chunk; with 1 MB, 0.07 s and
 * 0.10 s. (The read phase keeps 64 KB: papaparse is slower on 1 MB strings.)
 */
const WALK_CHUNK_BYTES = 1 << 20;

/** A way to walk the file: calls `header` once and `row` for each data row; false if it lost count. */
type Walk = (source: AsyncIterable<Uint8Array>, facts: ReportFacts, out: ReportOut) => Promise<boolean>;

/** Writes the report file with one walk of the file: its rows, or undefined when the walk lost count. */
async function writeFile(
  p: Pipeline,
  facts: ReportFacts,
  columns: Column[],
  table: string,
  path: string,
  walk: Walk,
  signal?: AbortSignal,
): Promise<number | undefined> {
  const { sql, job } = p;
  signal?.throwIfAborted();
  const source = await p.store.read(job.objectKey!, facts.objectEtag ?? undefined, { chunkBytes: WALK_CHUNK_BYTES });
  // The walk sees the stream's errors through its own reading. This listener is for the error a
  // discard raises after the walk stopped reading (it waits on the database): without one, that
  // error is an uncaughtException and the worker exits.
  source.on('error', () => {});
  const stop = () => source.destroy(new Error('the rejected-rows report draft was discarded'));
  signal?.addEventListener('abort', stop, { once: true });
  // Made once the source is open (a store that refused it left the file open before), and closed
  // with it below.
  const file = createWriteStream(path);
  const out = new ReportOut(file, recordedPages(sql, table, job.accountId), columns);
  let whole = false;
  try {
    signal?.throwIfAborted();
    whole = (await walk(decompressed(source), facts, out)) && (await out.done());
  } finally {
    signal?.removeEventListener('abort', stop);
    source.destroy();
    await out.close();
  }
  return whole ? out.rows : undefined;
}

/**
 * The recorded rows in row order, a page at a time, each page a statement of its own after the last
 * row_no seen (the table's key is (account_id, row_no), so no row comes twice or is skipped).
 * Not a cursor: a connection terminated while postgres.js's cursor waited on its consumer threw
 * inside the library (`query.reject` of null at PortalSuspended) as an unhandled rejection, and the
 * worker exited. A page's statement fails like any other, and one between pages meets a new
 * connection.
 */
export async function* recordedPages(
  sql: Sql,
  table: string,
  accountId: string,
  pageRows = PAGE_ROWS,
): AsyncGenerator<Rejected[]> {
  let after = 0; // data rows are numbered from 1
  for (;;) {
    const page = await sql<Rejected[]>`
      select row_no, reason, column_no, info from ${sql(table)}
      where account_id = ${accountId}::uuid and row_no > ${after}::int8
      order by row_no limit ${pageRows}`;
    if (page.length > 0) yield page;
    if (page.length < pageRows) return;
    after = Number(page[page.length - 1]!.row_no);
  }
}

/** The report being written: its rows in file order, matched against the file's data rows. */
class ReportOut {
  private batch: Rejected[] = [];
  private at = 0;
  private next: Rejected | undefined;
  private nextRow = Infinity;
  private ended = false;
  private pending: string[] = [];
  private pendingChars = 0;
  private failure: unknown;
  /** recorded rows written so far */
  rows = 0;

  constructor(
    private readonly file: WriteStream,
    private readonly pages: AsyncIterator<Rejected[]>,
    private readonly columns: Column[],
  ) {
    // The file's error (a full disk) is thrown by the next flush: with no listener it would be an
    // uncaughtException, and a write to the broken stream would wait for a 'drain' that never comes.
    file.on('error', (e) => (this.failure ??= e));
  }

  /** The data row the report wants next (Infinity when it wants none). */
  get wanted(): number {
    return this.nextRow;
  }

  async start(): Promise<void> {
    await this.advance();
  }

  async header(cells: string): Promise<void> {
    await this.write(`${REPORT_COLUMNS.join(',')},${cells}\n`);
  }

  /**
   * The wanted row's cells, as a line of CSV text (`raw`: the row's own line from the file); moves
   * on to the next wanted row. A row with a broken quote is no CSV of its own (it would run on into
   * the next line of the report), so its line goes in as one field.
   */
  async row(cells: string, raw = false): Promise<void> {
    const r = this.next!;
    if (raw && r.reason === 'bad_quote') cells = csvField(cells);
    const column = r.column_no === null ? undefined : this.columns[r.column_no];
    const info = r.info === null ? null : Number(r.info);
    const detail = rejectionDetail(r.reason, column, info, this.columns.length);
    await this.write(`${r.row_no},${r.reason},${csvField(column?.name ?? '')},${csvField(detail)},${cells}\n`);
    this.rows++;
    await this.advance();
  }

  /** Whether every recorded row was found in the file. */
  async done(): Promise<boolean> {
    return this.next === undefined;
  }

  /** Ends the file whatever ended the walk (the database may be gone). */
  async close(): Promise<void> {
    try {
      await this.pages.return?.();
      await this.flush();
    } finally {
      this.file.end();
      await finished(this.file);
    }
  }

  private async advance(): Promise<void> {
    if (this.at >= this.batch.length && !this.ended) {
      const r = await this.pages.next();
      this.ended = r.done === true;
      this.batch = r.done ? [] : r.value;
      this.at = 0;
    }
    this.next = this.batch[this.at++];
    this.nextRow = this.next ? Number(this.next.row_no) : Infinity;
  }

  /**
   * Lines are gathered and written 256 KB at a time: a write stream's write() per line cost more
   * than the whole walk of the file (0.8 s for 15,000 lines in Bun 1.4, against 0.2 s for 1M lines).
   */
  private async write(s: string): Promise<void> {
    this.pending.push(s);
    this.pendingChars += s.length;
    if (this.pendingChars >= FLUSH_CHARS) await this.flush();
  }

  private async flush(): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    if (this.pending.length === 0) return;
    const text = this.pending.join('');
    this.pending = [];
    this.pendingChars = 0;
    if (!this.file.write(text)) await once(this.file, 'drain');
  }
}

const NEWLINE = 0x0a;
const CR = 0x0d;
const COMMA = 0x2c;
const QUOTE = 0x22;
const utf8 = new TextDecoder();

/**
 * The first bytes a blank line (one cell that trims to nothing) can start with: the whitespace
 * that String.prototype.trim removes (ASCII, and the lead bytes of U+00A0, U+1680, U+2000-U+205F,
 * U+3000 and U+FEFF in UTF-8), a quote, and CR (an empty CRLF line). A line starting with any other
 * byte has a first cell that does not trim to nothing: not blank, whatever follows.
 */
const BLANK_START = new Uint8Array(256);
for (const b of [0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, QUOTE, 0xc2, 0xe1, 0xe2, 0xe3, 0xef]) BLANK_START[b] = 1;

/**
 * The fast walk: the file's lines, each one row. A line is decoded only when it is the header, a
 * wanted row, or has no comma (it might be blank; a line with a comma never is). Counts lines as
 * papaparse counts rows (a last empty line is no row), and says at the end whether that count is
 * the read's: when it is not, some row spanned lines and the numbering may be off.
 */
export const byLines: Walk = async (source, facts, out) => {
  await out.start();
  const crlf = facts.fileLinebreak === '\r\n';
  let lines = 0;
  let headerSeen = false;
  let dataRow = 0;
  let first = true;

  // Synchronous for a line the report does not want (nearly all): a promise only when it writes.
  const line = (bytes: Uint8Array, last: boolean): Promise<void> | undefined => {
    let start = 0;
    let end = bytes.length;
    if (first) {
      first = false;
      if (end >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) start = 3; // a BOM
    }
    if (last && end === start) return; // the file ended with a line break
    lines++;
    if (crlf && !last && end > start && bytes[end - 1] === CR) end--;
    const text = bytes.subarray(start, end);
    if (text.indexOf(COMMA) === -1 && isBlank(utf8.decode(text), text.indexOf(QUOTE) !== -1)) return;
    if (!headerSeen) {
      headerSeen = true;
      return out.header(utf8.decode(text));
    }
    dataRow++;
    if (dataRow === out.wanted) return out.row(utf8.decode(text), true);
  };

  let carry: Uint8Array | undefined;
  for await (const chunk of source) {
    let pos = 0;
    let nl = chunk.indexOf(NEWLINE);
    if (carry !== undefined) {
      if (nl === -1) {
        carry = Buffer.concat([carry, chunk]);
        continue;
      }
      await line(Buffer.concat([carry, chunk.subarray(0, nl)]), false);
      carry = undefined;
      pos = nl + 1;
      nl = chunk.indexOf(NEWLINE, pos);
    }
    while (nl !== -1) {
      // Nearly every line: not wanted, and it starts with a byte no blank line starts with, so it
      // is counted without a view of it being made (half the walk's time with 1 MB chunks).
      if (headerSeen && dataRow + 1 !== out.wanted && nl > pos && !BLANK_START[chunk[pos]!]) {
        lines++;
        dataRow++;
      } else {
        const written = line(chunk.subarray(pos, nl), false);
        if (written) await written;
      }
      pos = nl + 1;
      nl = chunk.indexOf(NEWLINE, pos);
    }
    if (pos < chunk.length) carry = Uint8Array.prototype.slice.call(chunk, pos);
  }
  await line(carry ?? new Uint8Array(0), true);
  return lines === facts.fileRows;
};

/** Whether a comma-free line is a blank row to the read phase: one cell that trims to nothing. */
function isBlank(text: string, quoted: boolean): boolean {
  if (!quoted) return text.trim() === '';
  const cells = Papa.parse<string[]>(text, { delimiter: ',' }).data[0] ?? [''];
  return cells.length === 1 && cells[0]!.trim() === '';
}

/**
 * The exact walk: the file through the read phase's own parser, numbered by its rules, with the
 * wanted rows' cells written back as CSV. Each parsed chunk is matched while the text is paused,
 * so memory stays one chunk.
 */
const byParsing: Walk = async (source, facts, out) => {
  await out.start();
  let headerSeen = false;
  let dataRow = 0;
  let rows = 0;
  let failed: unknown;
  const text = utf8Text(source);
  const take = async (chunk: string[][]): Promise<void> => {
    for (const cells of chunk) {
      if (cells.length === 1 && cells[0]!.trim() === '') continue; // a blank line, as the read phase
      if (!headerSeen) {
        headerSeen = true;
        await out.header(cells.map(csvField).join(','));
        continue;
      }
      dataRow++;
      if (dataRow === out.wanted) await out.row(cells.map(csvField).join(','));
    }
  };
  let taking = Promise.resolve();
  await parseCsv(text, (chunk) => {
    rows += chunk.length;
    text.pause();
    taking = taking
      .then(() => take(chunk))
      .then(
        () => {
          text.resume();
        },
        (e: unknown) => {
          failed ??= e;
          text.destroy(e instanceof Error ? e : new Error(String(e)));
        },
      );
  });
  await taking;
  if (failed !== undefined) throw failed;
  return rows === facts.fileRows;
};

import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type postgres from 'postgres';
import type { StagedRow } from './cells';
import { StagingBytes } from './staging-binary';

type Conn = postgres.ReservedSql<{}>;

/** Bytes handed to the socket per write; large enough that per-write overhead vanishes. */
const SEGMENT_BYTES = 64 * 1024;
/**
 * Queued bytes above which the parser is paused, and below half of which it resumes. Small on
 * purpose: a 4M-character queue of text measured ~50 MB more peak RSS, and a peak that grew with
 * the length of the run.
 */
const HIGH_WATER_BYTES = 1024 * 1024;

/**
 * COPYs staged rows into one table on a reserved connection, outside any transaction (a COPY that
 * fails inside `sql.begin` can hang the transaction), in PostgreSQL's binary format
 * (staging-binary.ts). One COPY statement per `batchSize` rows.
 *
 * The parser adds rows synchronously; a pump writes queued segments to the socket in the
 * background, so PostgreSQL ingests one segment while the worker parses the next. When the queue
 * passes the high-water mark the caller pauses its input until `whenReady()` resolves: memory stays
 * bounded whatever the file size.
 */
export class CopySink {
  private readonly queue: { data: Buffer; endsStatement: boolean }[] = [];
  private queuedBytes = 0;
  private readonly bytes = new StagingBytes(SEGMENT_BYTES + 16 * 1024);
  private rowsInStatement = 0;
  private writable: Writable | undefined;
  private pumping: Promise<void> | undefined;
  /** Separate from `pumping`: a pump can finish synchronously, before its promise is stored. */
  private running = false;
  private failure: unknown;
  private waiters: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  /** Rows accepted so far. */
  rows = 0;

  constructor(
    private readonly conn: Conn,
    private readonly table: string,
    private readonly batchSize: number,
  ) {}

  add(row: StagedRow): void {
    if (this.rowsInStatement === 0) this.bytes.header();
    this.bytes.row(row);
    this.rows++;
    if (++this.rowsInStatement >= this.batchSize) this.cut(true);
    else if (this.bytes.length >= SEGMENT_BYTES) this.cut(false);
  }

  /** False when the caller should pause its input until `whenReady()`; throws a COPY failure. */
  get ready(): boolean {
    if (this.failure !== undefined) throw this.failure;
    return this.queuedBytes < HIGH_WATER_BYTES;
  }

  whenReady(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.queuedBytes < HIGH_WATER_BYTES / 2) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /**
   * Ends the running COPY statement with the rows added so far and waits until PostgreSQL has
   * taken every statement: at the end of the read, and after each piece of a paced read (read.ts),
   * whose rest must not overlap PostgreSQL's work on the piece.
   */
  async flush(): Promise<void> {
    if (this.rowsInStatement > 0) this.cut(true);
    await this.pumping;
    if (this.failure !== undefined) throw this.failure;
  }

  /**
   * Ends a running COPY with CopyFail and waits for the pump to stop, so the connection is usable
   * again (and holds no lock on the staging table) when this returns; nothing is kept.
   */
  async abort(): Promise<void> {
    this.failure ??= new Error('COPY aborted');
    this.writable?.destroy(new Error('import aborted'));
    this.writable = undefined;
    await this.pumping;
  }

  private cut(endsStatement: boolean): void {
    if (endsStatement) {
      this.bytes.trailer();
      this.rowsInStatement = 0;
    }
    const data = this.bytes.take();
    this.queue.push({ data, endsStatement });
    this.queuedBytes += data.length;
    if (!this.running) {
      this.running = true;
      this.pumping = this.pump();
    }
  }

  private async pump(): Promise<void> {
    try {
      while (this.queue.length > 0 && this.failure === undefined) {
        const segment = this.queue[0]!;
        this.writable ??= await this.open();
        const w = this.writable;
        if (this.failure !== undefined) break; // aborted while the COPY was starting
        const more = w.write(segment.data);
        this.queue.shift();
        this.queuedBytes -= segment.data.length;
        if (!more) await once(w, 'drain');
        if (segment.endsStatement) {
          this.writable = undefined;
          w.end();
          // Resolves once PostgreSQL acknowledged the statement; rejects if the connection closes
          // first. Unpatched, postgres.js left it pending forever (patches/, porsager/postgres#1173).
          await finished(w);
        }
        this.wake();
      }
    } catch (e) {
      this.failure ??= e;
      this.writable?.destroy(e instanceof Error ? e : new Error(String(e)));
      this.writable = undefined;
      for (const w of this.waiters.splice(0)) w.reject(e);
    } finally {
      if (this.failure !== undefined) {
        this.writable?.destroy(new Error('import aborted'));
        this.writable = undefined;
      }
      this.running = false;
    }
  }

  private async open(): Promise<Writable> {
    const w = await this.conn`
      copy ${this.conn(this.table)} (row_no, email_md5, email, attributes, brand_ids, attribute_count)
      from stdin with (format binary)`.writable();
    // Errors surface through write/drain/finished; this keeps a late one from going unhandled.
    w.on('error', () => {});
    return w;
  }

  private wake(): void {
    if (this.queuedBytes >= HIGH_WATER_BYTES / 2) return;
    for (const w of this.waiters.splice(0)) w.resolve();
  }
}

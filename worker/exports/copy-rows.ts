import type { Readable } from 'node:stream';
import type { Sql } from '../../src/db';

/** Bytes handed on at a time: PostgreSQL sends one CopyData message per row, far too small to pass on alone. */
const BATCH_BYTES = 256 * 1024;
/** Batches waiting for the consumer before the COPY is paused (backpressure reaches the server's socket). */
const QUEUED_BATCHES = 4;
/**
 * While the API is busy, the COPY is read at 1 / (1 + EXPORT_PACE) of the rate it reached while it
 * was not: its backend then works half the time and leaves a core to the API's statements. Bounded
 * by rate, not by rests between batches: loopback socket buffers hold megabytes, so a short rest
 * would only let the backend fill them; a lower read rate is what lowers the rate it can send at.
 */
export const EXPORT_PACE = 1;
/** The unpaced rate is measured over stretches of at least this long (the first one of the COPY too). */
const RATE_WINDOW_MS = 500;

/** What paces a COPY: whether the API is busy now (src/imports/api-load.ts). */
export interface CopyPace {
  apiBusy: () => boolean;
}

export interface CopyRows {
  /** The COPY's output in batches of about BATCH_BYTES, then its end (or its error). */
  batches: AsyncGenerator<Buffer>;
  /** Rows received so far: PostgreSQL sends each row of a COPY TO as one CopyData message. */
  rows(): number;
  /** Milliseconds the COPY was held back while the API was busy. */
  pausedMs(): number;
  /**
   * Stops the COPY: a cancel request to the server, and the rest of its output read and dropped.
   * Destroying postgres.js's stream instead would leave the socket paused and the connection stuck.
   */
  abort(reason: Error): void;
}

/** Runs `statement` (a COPY … TO STDOUT) and streams its output with backpressure, paced by `pace`. */
export async function copyRows(sql: Sql, statement: string, pace?: CopyPace): Promise<CopyRows> {
  const query = sql.unsafe(statement);
  const source = (await query.readable()) as unknown as Readable;
  const rate = new PacedRate();
  let resting = false;
  let pausedMs = 0;
  let rows = 0;
  let current = Buffer.allocUnsafe(BATCH_BYTES);
  let used = 0;
  const ready: Buffer[] = [];
  let ended = false;
  let failure: Error | undefined;
  let aborted: Error | undefined;
  let wake: (() => void) | undefined;
  const notify = () => {
    wake?.();
    wake = undefined;
  };

  source.on('data', (chunk: Buffer) => {
    rows++;
    if (aborted) return;
    if (chunk.length > BATCH_BYTES - used) {
      const batch = used;
      if (used > 0) ready.push(current.subarray(0, used));
      current = Buffer.allocUnsafe(Math.max(BATCH_BYTES, chunk.length));
      used = 0;
      if (ready.length >= QUEUED_BATCHES) source.pause();
      const rest = rate.batch(batch, pace?.apiBusy() === true);
      if (rest > 0 && !resting) {
        resting = true;
        pausedMs += rest;
        source.pause();
        setTimeout(() => {
          resting = false;
          if (ready.length < QUEUED_BATCHES && !ended && !failure) source.resume();
        }, rest);
      }
      notify();
    }
    chunk.copy(current, used);
    used += chunk.length;
  });
  source.on('end', () => {
    ended = true;
    notify();
  });
  source.on('error', (e) => {
    failure = e;
    notify();
  });

  async function* batches(): AsyncGenerator<Buffer> {
    try {
      for (;;) {
        if (aborted) throw aborted;
        if (failure) throw failure;
        const next = ready.shift();
        if (next) {
          if (ready.length < QUEUED_BATCHES && !resting && source.isPaused()) source.resume();
          yield next;
          continue;
        }
        if (ended) {
          if (used > 0) yield current.subarray(0, used);
          used = 0;
          return;
        }
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      // A consumer that stopped early (its upload failed) must not leave the COPY running.
      if (!ended && !failure && !aborted) stop(new Error('the export stopped reading'));
    }
  }

  function stop(reason: Error) {
    if (aborted || ended || failure) return;
    aborted = reason;
    ready.length = 0;
    source.resume();
    void Promise.resolve(query.cancel()).catch(() => {});
    notify();
  }

  return { batches: batches(), rows: () => rows, pausedMs: () => pausedMs, abort: stop };
}

/**
 * The COPY's read rate: measured over unpaced stretches, and while paced held at 1 / (1 + EXPORT_PACE)
 * of the last one measured. `batch` is told each batch's bytes and whether the API is busy; it
 * answers how long to hold the COPY back before the next (0: not at all). The hold is reckoned from
 * the paced stretch's start, so a COPY slower than the held rate is never held.
 */
export class PacedRate {
  /** bytes a second of the last unpaced stretch; 0 until one was measured */
  private unpaced = 0;
  /** the current stretch's start; undefined before the first batch */
  private since: number | undefined;
  private bytes = 0;
  private paced = false;

  constructor(private readonly now = () => performance.now()) {}

  batch(bytes: number, busy: boolean): number {
    const now = this.now();
    // Measured from the first batch on: the time to the first row is the statement's start, not its rate.
    if (this.since === undefined) {
      this.since = now;
      return 0;
    }
    // A pace needs a rate to hold: the COPY's first stretch always runs free.
    const pace = busy && this.unpaced > 0;
    if (pace !== this.paced) {
      if (!this.paced) this.measure(now);
      this.paced = pace;
      this.since = now;
      this.bytes = 0;
    }
    this.bytes += bytes;
    if (pace) return Math.max(0, Math.round(this.since + (this.bytes * 1000 * (1 + EXPORT_PACE)) / this.unpaced - now));
    if (now - this.since >= RATE_WINDOW_MS) {
      this.measure(now);
      this.since = now;
      this.bytes = 0;
    }
    return 0;
  }

  private measure(now: number): void {
    const ms = now - this.since!;
    if (ms >= RATE_WINDOW_MS / 2 && this.bytes > 0) this.unpaced = (this.bytes * 1000) / ms;
  }
}

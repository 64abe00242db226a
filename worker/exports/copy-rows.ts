import type { Readable } from 'node:stream';
import type { Sql } from '../../src/db';

/** Bytes handed on at a time: PostgreSQL sends one CopyData message per row, far too small to pass on alone. */
const BATCH_BYTES = 256 * 1024;
/** Batches waiting for the consumer before the COPY is paused (backpressure reaches the server's socket). */
const QUEUED_BATCHES = 4;

export interface CopyRows {
  /** The COPY's output in batches of about BATCH_BYTES, then its end (or its error). */
  batches: AsyncGenerator<Buffer>;
  /** Rows received so far: PostgreSQL sends each row of a COPY TO as one CopyData message. */
  rows(): number;
  /**
   * Stops the COPY: a cancel request to the server, and the rest of its output read and dropped.
   * Destroying postgres.js's stream instead would leave the socket paused and the connection stuck.
   */
  abort(reason: Error): void;
}

/** Runs `statement` (a COPY … TO STDOUT) and streams its output with backpressure. */
export async function copyRows(sql: Sql, statement: string): Promise<CopyRows> {
  const query = sql.unsafe(statement);
  const source = (await query.readable()) as unknown as Readable;
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
      if (used > 0) ready.push(current.subarray(0, used));
      current = Buffer.allocUnsafe(Math.max(BATCH_BYTES, chunk.length));
      used = 0;
      if (ready.length >= QUEUED_BATCHES) source.pause();
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
          if (ready.length < QUEUED_BATCHES && source.isPaused()) source.resume();
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

  return { batches: batches(), rows: () => rows, abort: stop };
}

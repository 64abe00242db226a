/**
 * An open-loop load: request n is due at the start + n / rate seconds and is sent then, whether or
 * not the answers before it have come, as a customer's independent clients send. Its latency runs
 * from that due time, so a stall of the API (or of this process) shows in the figures instead of
 * holding the next requests back (coordinated omission). autocannon's own `overallRate` is no open
 * loop: each connection sends its second's share in a burst at the second's start and waits while
 * its connection is busy.
 */

export interface OpenLoopResult {
  /** requests sent */
  sent: number;
  ok2xx: number;
  non2xx: number;
  /** connection errors and timeouts */
  errors: number;
  statusCodes: Record<number, number>;
  /** requests in flight at once, at most: the slack of the end-state checks (a drained load has none) */
  peakInFlight: number;
}

export interface OpenLoopListener {
  /** an answer seen at `now` (ms, performance.now()) to a request due `ms` before it */
  response(now: number, ms: number, status: number): void;
  error(now: number): void;
}

export interface OpenLoop {
  /** stops sending; `done` resolves once every request in flight has its answer */
  stop(): void;
  done: Promise<OpenLoopResult>;
}

/** A request that takes longer than this counts as an error (the API's own timeouts are shorter). */
const TIMEOUT_MS = 10_000;

/**
 * Sends `send(n)` (resolving to the answer's status) at `rate` a second for `seconds`, or until
 * stopped, then waits for the requests in flight.
 */
export function openLoop(
  send: (n: number, signal: AbortSignal) => Promise<number>,
  rate: number,
  seconds: number,
  on: OpenLoopListener,
): OpenLoop {
  if (!(rate > 0)) throw new Error(`an open-loop load needs a rate above 0 (got ${rate})`);
  const result: OpenLoopResult = { sent: 0, ok2xx: 0, non2xx: 0, errors: 0, statusCodes: {}, peakInFlight: 0 };
  const pending = new Set<Promise<void>>();
  let stopped = false;
  const start = performance.now();
  const fire = (n: number, dueAt: number) => {
    result.sent++;
    const p = send(n, AbortSignal.timeout(TIMEOUT_MS)).then(
      (status) => {
        const now = performance.now();
        on.response(now, now - dueAt, status);
        result.statusCodes[status] = (result.statusCodes[status] ?? 0) + 1;
        if (status >= 200 && status < 300) result.ok2xx++;
        else result.non2xx++;
      },
      () => {
        on.error(performance.now());
        result.errors++;
      },
    );
    const tracked = p.finally(() => pending.delete(tracked));
    pending.add(tracked);
    result.peakInFlight = Math.max(result.peakInFlight, pending.size);
  };
  const run = async () => {
    const end = start + seconds * 1000;
    let n = 0;
    while (!stopped) {
      const now = performance.now();
      if (now >= end) break;
      // Every request due by now: after a late wake-up several go at once, each timed from its due time.
      const due = Math.floor(((now - start) * rate) / 1000) + 1;
      for (; n < due; n++) fire(n, start + (n * 1000) / rate);
      await Bun.sleep(Math.max(1, start + (n * 1000) / rate - performance.now()));
    }
    while (pending.size) await Promise.all([...pending]);
    return result;
  };
  return { stop: () => void (stopped = true), done: run() };
}

/** Each kind's rate: `total` split in proportion to `weights` (the kinds' req/s at capacity). */
export function splitRate<K extends string>(total: number, weights: Record<K, number>): Record<K, number> {
  const sum = Object.values<number>(weights).reduce((a, b) => a + b, 0);
  const keys = Object.keys(weights) as K[];
  return Object.fromEntries(keys.map((k) => [k, sum > 0 ? (total * weights[k]) / sum : total / keys.length])) as Record<
    K,
    number
  >;
}

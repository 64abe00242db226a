import IORedis, { type Redis } from 'ioredis';

/**
 * The API tells the workers when it is busy, so that imports give it room (issue 15, bench step
 * `mixed`). One Redis key, set by any API replica that served at least `rps` requests a second
 * over the last window, for a little longer than a window: while it exists, merge batches run in
 * paced pieces (worker/import/merge/batch.ts). Its value is the replica's load: its requests in
 * flight on average over about the last second (the time its answered requests took over the time
 * passed, Little's law) as a share of SATURATED_IN_FLIGHT, so that an import gives way in
 * proportion to what the API carries rather than to its presence (worker/import/pace.ts's
 * restFactor). Resting fully whenever it was busy made the import many times slower than the
 * spare capacity explains; the process's CPU share was tried first and missed a database-bound
 * API falling behind (bench/findings/2026-12-06-open-loop-mixed-1m.md). Requests in flight grow as
 * soon as the import slows the API's answers, so the import then rests more. Why the merge must
 * pace itself rather than only run at a lower CPU priority: the API's writes wait on WAL flushes,
 * and every flush must first write out the WAL the merge produced before it (measured: API backends
 * in WALWrite/WALSync, and nice 19 on the merge's backends left the other account's p99 at ×3).
 *
 * Both sides use a connection of their own that fails fast while Redis is away: the signal is
 * advisory, and a Redis outage means "not busy" (imports run at full speed), never a stuck request.
 */
export const API_BUSY_KEY = 'contacts:api-busy';

/** The API counts its requests over windows this long; the worker reads the key this often. */
export const API_LOAD_WINDOW_MS = 100;
/** How long the key outlives the window that set it: a missed window or two does not unset it. */
const BUSY_TTL_MS = 1_000;
/** Each window's figure moves the published load by this part of the difference: about a second's memory. */
const LOAD_SMOOTHING = 0.1;
/**
 * Requests in flight at which an API process counts as fully loaded: its database pool's default
 * size (DATABASE_POOL_SIZE), past which requests queue for a connection.
 */
export const SATURATED_IN_FLIGHT = 10;

function signalConnection(redisUrl: string): Redis {
  const redis = new IORedis(redisUrl, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
  redis.on('error', () => {}); // reconnects by itself; a command meanwhile fails and is ignored
  return redis;
}

/**
 * In the API: counts requests, and sets API_BUSY_KEY as soon as a window's count reaches `rps`'s
 * share of it (once a window: a load that starts is seen within milliseconds, not a window later).
 */
export class ApiLoadSignal {
  private count = 0;
  private threshold = Infinity;
  private readonly redis: Redis | undefined;
  private readonly timer: ReturnType<typeof setInterval> | undefined;
  /** requests in flight on average, smoothed over about the last second (LOAD_SMOOTHING) */
  private inFlight = 0;
  /** ms the requests answered since the last window took */
  private servedMs = 0;
  private at = performance.now();

  constructor(
    redisUrl: string,
    rps: number,
    private readonly key = API_BUSY_KEY,
  ) {
    if (rps <= 0) return; // IMPORT_YIELD_RPS=0: imports never give way to the API
    this.threshold = Math.max(1, Math.ceil((rps * API_LOAD_WINDOW_MS) / 1000));
    this.redis = signalConnection(redisUrl);
    this.timer = setInterval(() => {
      this.count = 0;
      this.measure();
    }, API_LOAD_WINDOW_MS);
    this.timer.unref();
  }

  private measure(): void {
    const now = performance.now();
    const window = this.servedMs / Math.max(1, now - this.at);
    this.inFlight += LOAD_SMOOTHING * (window - this.inFlight);
    this.servedMs = 0;
    this.at = now;
  }

  /** A request arrives. */
  hit(): void {
    if (++this.count === this.threshold) {
      const share = Math.min(1, this.inFlight / SATURATED_IN_FLIGHT);
      this.redis?.set(this.key, share.toFixed(2), 'PX', BUSY_TTL_MS).catch(() => {});
    }
  }

  /** A request was answered after `ms`. */
  served(ms: number): void {
    this.servedMs += ms;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.redis?.quit().catch(() => this.redis?.disconnect());
  }
}

/** In the worker: whether the API said it is busy, read every window in the background. */
export class ApiLoad {
  private busyNow = false;
  private shareNow = 0;
  private readonly redis: Redis;
  private readonly timer: ReturnType<typeof setInterval>;
  private reading = false;

  constructor(redisUrl: string, key = API_BUSY_KEY) {
    const redis = (this.redis = signalConnection(redisUrl));
    this.timer = setInterval(() => {
      if (this.reading) return;
      this.reading = true;
      redis
        .get(key)
        .then(
          (v) => {
            this.busyNow = v !== null;
            // A value that is no figure (`1`, as an API before the load was published wrote) counts as fully loaded.
            const share = Number(v);
            this.shareNow = v === null ? 0 : Number.isFinite(share) ? share : 1;
          },
          () => (this.busyNow = false),
        )
        .finally(() => (this.reading = false));
    }, API_LOAD_WINDOW_MS);
    this.timer.unref();
  }

  busy(): boolean {
    return this.busyNow;
  }

  /** The busy API's load, 0-1: its requests in flight over SATURATED_IN_FLIGHT (0 while it is not busy). */
  share(): number {
    return this.busyNow ? this.shareNow : 0;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

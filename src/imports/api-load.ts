import IORedis, { type Redis } from 'ioredis';

/**
 * The API tells the workers when it is busy, so that imports give it room (issue 15, bench step
 * `mixed`). One Redis key, set by any API replica that served at least `rps` requests a second
 * over the last window, for a little longer than a window: while it exists, merge batches run in
 * paced pieces (worker/import/merge/batch.ts). Why the merge must pace itself rather than only
 * run at a lower CPU priority: the API's writes wait on WAL flushes, and every flush must first
 * write out the WAL the merge produced before it (measured: API backends in WALWrite/WALSync, and
 * nice 19 on the merge's backends left the other account's p99 at ×3).
 *
 * Both sides use a connection of their own that fails fast while Redis is away: the signal is
 * advisory, and a Redis outage means "not busy" (imports run at full speed), never a stuck request.
 */
export const API_BUSY_KEY = 'contacts:api-busy';

/** The API counts its requests over windows this long; the worker reads the key this often. */
export const API_LOAD_WINDOW_MS = 100;
/** How long the key outlives the window that set it: a missed window or two does not unset it. */
const BUSY_TTL_MS = 1_000;

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

  constructor(
    redisUrl: string,
    rps: number,
    private readonly key = API_BUSY_KEY,
  ) {
    if (rps <= 0) return; // IMPORT_YIELD_RPS=0: imports never give way to the API
    this.threshold = Math.max(1, Math.ceil((rps * API_LOAD_WINDOW_MS) / 1000));
    this.redis = signalConnection(redisUrl);
    this.timer = setInterval(() => (this.count = 0), API_LOAD_WINDOW_MS);
    this.timer.unref();
  }

  hit(): void {
    if (++this.count === this.threshold) this.redis?.set(this.key, '1', 'PX', BUSY_TTL_MS).catch(() => {});
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.redis?.quit().catch(() => this.redis?.disconnect());
  }
}

/** In the worker: whether the API said it is busy, read every window in the background. */
export class ApiLoad {
  private busyNow = false;
  private readonly redis: Redis;
  private readonly timer: ReturnType<typeof setInterval>;
  private reading = false;

  constructor(redisUrl: string, key = API_BUSY_KEY) {
    const redis = (this.redis = signalConnection(redisUrl));
    this.timer = setInterval(() => {
      if (this.reading) return;
      this.reading = true;
      redis
        .exists(key)
        .then(
          (n) => (this.busyNow = n > 0),
          () => (this.busyNow = false),
        )
        .finally(() => (this.reading = false));
    }, API_LOAD_WINDOW_MS);
    this.timer.unref();
  }

  busy(): boolean {
    return this.busyNow;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

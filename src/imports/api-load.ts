import IORedis, { type Redis } from 'ioredis';
import { LatencyFloors } from './latency-floors';

/**
 * The API tells the workers when it is busy, so that imports give it room (issue 15, bench step
 * `mixed`). One Redis key, set by any API replica that served at least `rps` requests a second
 * over the last window, for a little longer than a window: while it exists, every phase of an
 * import goes in paced pieces (worker/import/pace.ts). Its value is two figures:
 * - the load: the requests a second the replica serves, smoothed over about the last second, as a
 *   share of the most it has served lately (PEAK_FALL; its capacity as far as it knows: one never
 *   pushed gives imports less room, not more), so that an import gives way in proportion to what the
 *   API carries rather than to its presence. Resting fully whenever it was busy made the import many times slower than
 *   the spare capacity explains (bench/findings/2026-12-06-open-loop-mixed-1m.md); so did its
 *   requests in flight as a share of its pool, the load's first form, which grows with every
 *   slowdown whatever causes it (bench/findings/2026-12-06-pacing-by-harm.md);
 * - the harm: its mean time per request, smoothed the same way, over its usual time at the rate it
 *   serves (latency-floors.ts), so that an import rests only while the API's answers are slower
 *   than usual.
 * Why the merge must pace itself rather than only run at a lower CPU priority: the API's writes
 * wait on WAL flushes, and every flush must first write out the WAL the merge produced before it
 * (measured: API backends in WALWrite/WALSync, and nice 19 on the merge's backends left the other
 * account's p99 at ×3).
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
 * How fast the most the API has served is forgotten, per window: halved in six hours, so that a
 * burst long past does not leave every later load looking light, while an import of an hour still
 * sees the capacity it started with (0.89 × of it after an hour).
 */
const PEAK_FALL = 2 ** (-API_LOAD_WINDOW_MS / 21_600_000);
/** A window with fewer answers than this says little about their mean time: it leaves the figure as it was. */
const MIN_ANSWERED = 5;

/** What the busy key says: the API's load, 0-1, and its harm, 1 and over (absent from an API before it was). */
export interface ApiLoadNow {
  share: number;
  harm?: number;
}

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
  /** ms the requests answered since the last window took */
  private servedMs = 0;
  /** requests answered since the last window */
  private answered = 0;
  /** mean ms per request, smoothed over about the last second (LOAD_SMOOTHING); 0 before any */
  private latency = 0;
  /** requests arrived a second, smoothed over about the last second (LOAD_SMOOTHING) */
  private rate = 0;
  /** the highest `rate` lately, falling by PEAK_FALL a window */
  private peakRate = 0;
  /** the usual `latency` at each rate */
  private readonly floors = new LatencyFloors();
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
      const arrived = this.count;
      this.count = 0;
      this.measure(arrived);
    }, API_LOAD_WINDOW_MS);
    this.timer.unref();
  }

  private measure(arrived: number): void {
    const now = performance.now();
    const elapsed = Math.max(1, now - this.at);
    this.rate += LOAD_SMOOTHING * ((arrived * 1000) / elapsed - this.rate);
    this.peakRate = Math.max(this.rate, this.peakRate * PEAK_FALL);
    if (this.answered >= MIN_ANSWERED) {
      const mean = this.servedMs / this.answered;
      this.latency = this.latency === 0 ? mean : this.latency + LOAD_SMOOTHING * (mean - this.latency);
      this.floors.see(this.rate, this.latency, now);
    }
    this.servedMs = 0;
    this.answered = 0;
    this.at = now;
  }

  /** The mean time per request over its usual time at this rate, 1 while there is no figure yet. */
  private harm(): number {
    return this.latency > 0 ? this.floors.harm(this.rate, this.latency, performance.now()) : 1;
  }

  /** A request arrives. */
  hit(): void {
    if (++this.count === this.threshold) {
      const share = this.peakRate > 0 ? Math.min(1, this.rate / this.peakRate) : 1;
      const value = `${share.toFixed(2)} ${this.harm().toFixed(2)}`;
      this.redis?.set(this.key, value, 'PX', BUSY_TTL_MS).catch(() => {});
    }
  }

  /** A request was answered after `ms`. */
  served(ms: number): void {
    this.servedMs += ms;
    this.answered++;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.redis?.quit().catch(() => this.redis?.disconnect());
  }
}

/** In the worker: whether the API said it is busy, read every window in the background. */
export class ApiLoad {
  private busyNow = false;
  private now: ApiLoadNow = { share: 0 };
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
            this.now = v === null ? { share: 0 } : parseLoad(v);
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

  /**
   * The busy API's load, 0-1 (its requests a second over the most it has served), and its harm (its
   * mean time per request over its usual time at that rate); `{ share: 0 }` while it is not busy.
   */
  load(): ApiLoadNow {
    return this.busyNow ? this.now : { share: 0 };
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

/**
 * The busy key's value: `share harm`. A value that is no figure (`1`, as an API before the load was
 * published wrote) counts as fully loaded; one with the share alone (before the harm was) has no harm.
 */
export function parseLoad(value: string): ApiLoadNow {
  const [share, harm] = value.split(' ').map(Number);
  if (share === undefined || !Number.isFinite(share)) return { share: 1 };
  return harm !== undefined && Number.isFinite(harm) ? { share, harm } : { share };
}

import IORedis, { type Redis } from 'ioredis';

/**
 * The shared side of the rate limits: one GCRA bucket per account in Redis, a key holding the
 * bucket's theoretical arrival time (TAT, µs on Redis's clock; the bucket is full when it is past).
 * Replicas do not ask it per request: each reserves a few tokens at a time (src/ratelimit/limiter.ts).
 *
 * RESERVE takes up to `want` tokens at once, as many as the bucket holds (GCRA: a request of n
 * tokens fits while TAT + n·interval ≤ now + burst·interval), atomically, on Redis's clock (TIME in
 * a script: replicas' clocks never meet). It answers the tokens granted and how far TAT then lies
 * ahead of now (µs), from which the caller knows what is left and, when nothing was granted, when
 * the next token comes. The key expires when the bucket would be full again: an idle account keeps
 * nothing in Redis.
 */
const RESERVE = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local want = tonumber(ARGV[1])
local interval = 1000000 / tonumber(ARGV[2])
local capacity = tonumber(ARGV[3]) * interval
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
-- 1e-9: a bucket that holds exactly one token must not read as 0.999999.
local room = math.floor((now + capacity - tat) / interval + 1e-9)
local granted = math.min(want, room)
if granted >= 1 then
  tat = math.ceil(tat + granted * interval)
  redis.call('SET', KEYS[1], tat, 'PX', math.ceil((tat - now) / 1000) + 1)
end
return {granted, math.ceil(tat - now)}
`;

export interface Reservation {
  granted: number;
  /** How far the bucket's TAT lies ahead of now after the grant, µs: 0 is a full bucket. */
  aheadUs: number;
}

export interface RateLimitStore {
  reserve(accountId: string, want: number, perSecond: number, burst: number): Promise<Reservation>;
  /** True once connected, false when `ms` pass first (the API starts anyway, without limits until then). */
  ready(ms: number): Promise<boolean>;
  close(): Promise<void>;
}

/** A command that Redis has not answered within this long fails: the request goes on without a limit. */
export const STORE_TIMEOUT_MS = 250;
/**
 * ioredis's own timeout, behind answeredWithin's: it only ends commands that a Redis which stopped
 * answering without closing its connection would otherwise keep in the client's queue.
 */
const CLIENT_TIMEOUT_MS = 10 * STORE_TIMEOUT_MS;

/** Redis did not answer within STORE_TIMEOUT_MS of the loop's time. */
export class StoreTimeoutError extends Error {}

/**
 * `pending`, or a StoreTimeoutError once it has gone `ms` without an answer. The timer alone does not
 * judge: a timer that expired while the event loop was busy (a GC pause, a burst of requests, the
 * process not scheduled) runs before the loop reads its sockets, so an answer that came in time but
 * waits unread would count as a Redis away, and every account's limit would be off for a second
 * under exactly the load limits are for. So the verdict waits for one more turn of the loop, in
 * which the sockets are read (a 0 ms timer set from an expired one runs after the next poll, in Bun
 * as in Node).
 */
export function answeredWithin<T>(pending: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const timer = setTimeout(
      () => setTimeout(() => settle(() => reject(new StoreTimeoutError(`Redis did not answer within ${ms} ms`))), 0),
      ms,
    );
    pending.then(
      (value) => settle(() => resolve(value)),
      (error: unknown) => settle(() => reject(error)),
    );
  });
}

type Scripted = Redis & {
  rateLimitReserve(key: string, want: number, perSecond: number, burst: number): Promise<[number, number]>;
};

/**
 * The buckets in Redis over a connection of the limiter's own that never queues: no offline queue
 * (a command while Redis is away fails at once instead of waiting for the reconnect), no retry after
 * a lost connection, and a timeout on every command (answeredWithin: a Redis that stopped answering
 * without closing its connection, or one too slow to wait for). ioredis reconnects by itself;
 * defineCommand sends EVALSHA and falls back to EVAL when a restarted Redis has lost the script.
 */
export class RedisRateLimitStore implements RateLimitStore {
  private readonly redis: Scripted;

  constructor(
    redisUrl: string,
    private readonly prefix = 'contacts:rate:',
  ) {
    const redis = new IORedis(redisUrl, {
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      commandTimeout: CLIENT_TIMEOUT_MS,
      connectTimeout: 2_000,
    });
    redis.on('error', () => {}); // the limiter counts and logs the failed commands; ioredis reconnects
    redis.defineCommand('rateLimitReserve', { numberOfKeys: 1, lua: RESERVE });
    this.redis = redis as Scripted;
  }

  async reserve(accountId: string, want: number, perSecond: number, burst: number): Promise<Reservation> {
    const [granted, aheadUs] = await answeredWithin(
      this.redis.rateLimitReserve(this.prefix + accountId, want, perSecond, burst),
      STORE_TIMEOUT_MS,
    );
    return { granted, aheadUs };
  }

  ready(ms: number): Promise<boolean> {
    const redis = this.redis;
    if (redis.status === 'ready') return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        redis.off('ready', onReady);
        resolve(ok);
      };
      const onReady = () => done(true);
      const timer = setTimeout(() => done(false), ms);
      redis.once('ready', onReady);
    });
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

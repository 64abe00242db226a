import type { AccountRateLimit } from '../auth/authenticate';
import { errorFields, log } from '../log';
import type { RateLimitStore, Reservation } from './store';

/**
 * Rate limits per account, shared by the account's keys and every API replica (issue 38;
 * docs/rate-limits.md), at the cost of a Map lookup for most requests.
 *
 * A Redis round trip per request costs the API about 8 µs of CPU pipelined at 64 connections and
 * 50 µs one at a time (measured with ioredis on Bun), against a budget of 20 µs. So each replica
 * reserves tokens from the account's shared bucket (src/ratelimit/store.ts) a few at a time and
 * admits from its reservation locally: a request that finds a token takes it, and when the
 * reservation runs low the next one is asked for in the background. A request that finds none waits
 * for the reservation under way (one per account and replica; it asks for every request waiting
 * then, plus the ones ahead), and a bucket found empty is known empty until its next token: the
 * requests meanwhile are refused here, without Redis.
 *
 * Why replicas together still admit no more than the account's limit: every admitted request spends
 * a token the shared bucket granted, so over any span the account gets at most its burst plus its
 * rate times the span, plus the tokens the replicas held at its start. That excess is bounded by
 * what a replica reserves ahead: at most a tenth of the burst (and 100 ms of the rate), starting at
 * 1 and doubling while reservations come fast. Unused tokens are dropped after HOLD_MS; the account
 * loses them (it is never given more than its limit, sometimes a little less).
 *
 * Redis away (a command fails or takes longer than STORE_TIMEOUT_MS): every request is admitted
 * without a limit and without waiting, logged once when it starts and once when it ends; one
 * request a second tries Redis again in the background.
 */
const HOLD_MS = 1_000;
/** Reservations this close after one another double what is reserved ahead. */
const FAST_MS = 100;
const AHEAD_SHARE = 10;
const RETRY_STORE_MS = 1_000;
/** Accounts with their own value of the limited-requests metric's label; the rest count as `other`. */
export const LABELLED_ACCOUNTS = 100;
const MAX_BUCKETS = 10_000;
/** A verdict of take(): no token here, nothing known: ask the store. */
const ASK = -2;

/** Response header fields by lower-case name (a request's `headers`, src/http/context.ts). */
export type HeaderFields = Record<string, string>;

/** One account's share of its bucket on this replica. */
class Bucket {
  /** Reserved here and not yet spent. */
  tokens = 0;
  validUntil = 0;
  /** The shared bucket had no token for us before this (performance.now() ms). */
  blockedUntil = 0;
  /** The shared bucket would be full again at this time, as of the last reservation. */
  fullAt = 0;
  /** Tokens to reserve beyond the requests waiting. */
  ahead = 1;
  lastReserve = -Infinity;
  waiting = 0;
  reserving: Promise<void> | undefined;
  readonly policy: string;
  readonly intervalMs: number;
  readonly maxAhead: number;

  constructor(
    readonly perSecond: number,
    readonly burst: number,
  ) {
    this.intervalMs = 1000 / perSecond;
    this.maxAhead = Math.max(1, Math.min(Math.floor(burst / AHEAD_SHARE), Math.ceil(perSecond / AHEAD_SHARE)));
    // The draft's quota over a window, for a token bucket: the burst, refilled from empty in w seconds.
    this.policy = `"account";q=${burst};w=${Math.max(1, Math.ceil(burst / perSecond))}`;
  }
}

export interface RateLimitStats {
  /** Refused requests by account, for the first LABELLED_ACCOUNTS accounts refused. */
  readonly limited: Map<string, number>;
  limitedOther: number;
  storeErrors: number;
  /** Admitted without a limit while the store was away. */
  unlimited: number;
  reservations: number;
  storeUp: boolean;
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private retryStoreAt = 0;
  readonly stats: RateLimitStats = {
    limited: new Map(),
    limitedOther: 0,
    storeErrors: 0,
    unlimited: 0,
    reservations: 0,
    storeUp: true,
  };

  constructor(
    private readonly store: RateLimitStore,
    private readonly defaults: AccountRateLimit,
  ) {}

  /**
   * The verdict on one request of the account: 0 admitted, n > 0 refused (admitted again after n
   * seconds), -1 admitted without a limit (the store is away). Admitted or refused under a limit,
   * `headers` gets the RateLimit-Policy and RateLimit fields. A promise only when the replica holds
   * no token and must ask the store.
   */
  admit(accountId: string, own: AccountRateLimit | null, headers: HeaderFields): number | Promise<number> {
    const limit = own ?? this.defaults;
    let bucket = this.buckets.get(accountId);
    if (bucket === undefined || bucket.perSecond !== limit.perSecond || bucket.burst !== limit.burst)
      bucket = this.bucketFor(accountId, limit);
    const now = performance.now();
    if (!this.stats.storeUp) return this.unlimited(bucket, accountId, now);
    const verdict = this.take(bucket, accountId, now, headers);
    return verdict === ASK ? this.waitFor(bucket, accountId, headers) : verdict;
  }

  /** An admitted request's key was refused after all (a cached claim, src/http/context.ts): its token comes back. */
  refund(accountId: string): void {
    const bucket = this.buckets.get(accountId);
    if (bucket && performance.now() < bucket.validUntil) bucket.tokens++;
  }

  /** Waits up to `ms` for the store's connection at start; the API serves meanwhile, without limits. */
  async ready(ms: number): Promise<boolean> {
    return this.store.ready(ms);
  }

  close(): Promise<void> {
    return this.store.close();
  }

  private bucketFor(accountId: string, limit: AccountRateLimit): Bucket {
    const bucket = new Bucket(limit.perSecond, limit.burst);
    this.buckets.delete(accountId);
    // Oldest first: a forgotten account's next request asks the store again.
    if (this.buckets.size >= MAX_BUCKETS) this.buckets.delete(this.buckets.keys().next().value!);
    this.buckets.set(accountId, bucket);
    return bucket;
  }

  private take(bucket: Bucket, accountId: string, now: number, headers: HeaderFields): number {
    if (bucket.tokens > 0) {
      if (now < bucket.validUntil) {
        bucket.tokens--;
        if (bucket.tokens * 2 <= bucket.ahead && bucket.reserving === undefined) void this.reserve(bucket, accountId);
        const aheadMs = bucket.fullAt > now ? bucket.fullAt - now : 0;
        const remaining = Math.min(
          bucket.burst,
          bucket.tokens + Math.max(0, Math.floor(bucket.burst - aheadMs / bucket.intervalMs)),
        );
        headers['ratelimit-policy'] = bucket.policy;
        headers.ratelimit = `"account";r=${remaining};t=${Math.ceil(aheadMs / 1000)}`;
        return 0;
      }
      // Held too long unused: dropped, and less is reserved ahead next time.
      bucket.tokens = 0;
      bucket.ahead = Math.max(1, bucket.ahead >> 1);
    }
    if (now >= bucket.blockedUntil) return ASK;
    const seconds = Math.max(1, Math.ceil((bucket.blockedUntil - now) / 1000));
    headers['ratelimit-policy'] = bucket.policy;
    headers.ratelimit = `"account";r=0;t=${seconds}`;
    this.countLimited(accountId);
    return seconds;
  }

  private async waitFor(bucket: Bucket, accountId: string, headers: HeaderFields): Promise<number> {
    for (;;) {
      bucket.waiting++;
      try {
        await (bucket.reserving ?? this.reserve(bucket, accountId));
      } finally {
        bucket.waiting--;
      }
      const now = performance.now();
      if (!this.stats.storeUp) return this.unlimited(bucket, accountId, now);
      // Each round trip grants tokens or learns when the next comes, so this ends.
      const verdict = this.take(bucket, accountId, now, headers);
      if (verdict !== ASK) return verdict;
    }
  }

  private reserve(bucket: Bucket, accountId: string): Promise<void> {
    const now = performance.now();
    if (now - bucket.lastReserve < FAST_MS) bucket.ahead = Math.min(bucket.maxAhead, bucket.ahead * 2);
    bucket.lastReserve = now;
    this.stats.reservations++;
    const done = this.store.reserve(accountId, bucket.waiting + bucket.ahead, bucket.perSecond, bucket.burst).then(
      (r) => {
        bucket.reserving = undefined;
        this.granted(bucket, r);
      },
      (error: unknown) => {
        bucket.reserving = undefined;
        this.storeFailed(error);
      },
    );
    bucket.reserving = done;
    return done;
  }

  private granted(bucket: Bucket, r: Reservation): void {
    const now = performance.now();
    if (!this.stats.storeUp) {
      this.stats.storeUp = true;
      log('info', 'rate limit store reachable again: requests are limited again');
    }
    bucket.fullAt = now + r.aheadUs / 1000;
    if (r.granted > 0) {
      bucket.tokens += r.granted;
      bucket.validUntil = now + HOLD_MS;
      bucket.blockedUntil = 0;
    } else {
      // The next token comes when the TAT is one interval short of a full burst ahead.
      const nextMs = r.aheadUs / 1000 - (bucket.burst - 1) * bucket.intervalMs;
      bucket.blockedUntil = now + Math.max(1, nextMs);
    }
  }

  private storeFailed(error: unknown): void {
    this.stats.storeErrors++;
    if (!this.stats.storeUp) return;
    this.stats.storeUp = false;
    this.retryStoreAt = performance.now() + RETRY_STORE_MS;
    // What was reserved or learnt may be gone with Redis's data: start afresh when it is back.
    this.buckets.clear();
    log('warn', 'rate limit store unreachable: requests are admitted without limits until it answers', {
      ...errorFields(error),
    });
  }

  private unlimited(bucket: Bucket, accountId: string, now: number): number {
    this.stats.unlimited++;
    if (now >= this.retryStoreAt && bucket.reserving === undefined) {
      this.retryStoreAt = now + RETRY_STORE_MS;
      void this.reserve(bucket, accountId);
    }
    return -1;
  }

  private countLimited(accountId: string): void {
    const limited = this.stats.limited;
    const n = limited.get(accountId);
    if (n !== undefined) limited.set(accountId, n + 1);
    else if (limited.size < LABELLED_ACCOUNTS) limited.set(accountId, 1);
    else this.stats.limitedOther++;
  }
}

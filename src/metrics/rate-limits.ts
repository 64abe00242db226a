import { Counter, Gauge, type Registry } from 'prom-client';
import { LABELLED_ACCOUNTS, type RateLimitStats } from '../ratelimit/limiter';
import { PREFIX } from './registry';

/**
 * The rate limiter's figures (src/ratelimit/limiter.ts counts them; they are read at scrape time).
 * The `account` label is bounded: the first LABELLED_ACCOUNTS accounts this process refused have
 * their id as its value, every later one counts as `other`.
 */
export function rateLimitMetrics(registry: Registry, stats: RateLimitStats): void {
  new Counter({
    name: `${PREFIX}rate_limited_requests_total`,
    help:
      `Requests refused 429 over their account's rate limit, by account (the first ${LABELLED_ACCOUNTS} ` +
      'accounts refused by this process; later ones as "other").',
    labelNames: ['account'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [account, n] of stats.limited) this.inc({ account }, n);
      if (stats.limitedOther) this.inc({ account: 'other' }, stats.limitedOther);
    },
  });
  new Counter({
    name: `${PREFIX}rate_limit_store_errors_total`,
    help: 'Reservations from the rate limits store (Redis) that failed or timed out; requests went on without a limit.',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.storeErrors);
    },
  });
  new Counter({
    name: `${PREFIX}rate_limit_unlimited_requests_total`,
    help: 'Requests admitted without a rate limit because the rate limits store (Redis) was unreachable.',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.unlimited);
    },
  });
  new Counter({
    name: `${PREFIX}rate_limit_reservations_total`,
    help: 'Round trips to the rate limits store: each reserves tokens for several requests of one account.',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.reservations);
    },
  });
  new Gauge({
    name: `${PREFIX}rate_limit_store_up`,
    help: '1 while the rate limits store (Redis) answers and requests are limited, 0 while they are not.',
    registers: [registry],
    collect() {
      this.set(stats.storeUp ? 1 : 0);
    },
  });
}

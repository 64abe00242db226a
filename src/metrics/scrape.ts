import { errorFields, log } from '../log';

/** How long a scrape waits for PostgreSQL or Redis before it answers without their figures. */
export const SCRAPE_TIMEOUT_MS = 3_000;

/**
 * A figure read from PostgreSQL or Redis when Prometheus scrapes. One read at a time (scrapes that
 * come while one runs share it), and none takes longer than SCRAPE_TIMEOUT_MS: a hung database or
 * a Redis being reconnected (ioredis queues commands until it is back) must not hang /metrics.
 * Undefined when the read failed or timed out; the metric then has no samples in that scrape. The
 * first failure is logged, and the recovery, not every scrape in between.
 */
export function scrapeSource<T>(what: string, read: () => Promise<T>): () => Promise<T | undefined> {
  let running: Promise<T | undefined> | undefined;
  let failing = false;
  const once = async (): Promise<T | undefined> => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${SCRAPE_TIMEOUT_MS} ms`)), SCRAPE_TIMEOUT_MS);
    });
    try {
      const value = await Promise.race([read(), timeout]);
      if (failing) log('info', 'metrics source answers again', { source: what });
      failing = false;
      return value;
    } catch (e) {
      if (!failing) log('warn', 'metrics source failed; its metrics are left out', { source: what, ...errorFields(e) });
      failing = true;
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  };
  return () => (running ??= once().finally(() => (running = undefined)));
}

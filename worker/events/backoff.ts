/** The wait before the first retry is at most this (and at least half of it). */
export const FIRST_RETRY_MS = 5_000;
/** Retries never wait longer than this, however long the endpoint has been failing. */
export const MAX_RETRY_MS = 60 * 60_000;
/** An endpoint whose every delivery failed for this long is disabled (the next failure after it). */
export const DISABLE_AFTER_DAYS = 3;

/**
 * The wait before the next attempt of a batch that has failed `failures` times: exponential, from
 * FIRST_RETRY_MS up to MAX_RETRY_MS, with equal jitter (between half and all of it) so endpoints
 * that failed together do not all retry at the same moment.
 *
 * @example
 * retryDelayMs(1) // 2,500 to 5,000
 * retryDelayMs(4) // 20,000 to 40,000
 */
export function retryDelayMs(failures: number, random: () => number = Math.random): number {
  const ceiling = Math.min(FIRST_RETRY_MS * 2 ** Math.max(0, failures - 1), MAX_RETRY_MS);
  return Math.round(ceiling * (0.5 + random() / 2));
}

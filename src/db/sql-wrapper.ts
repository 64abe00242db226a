/**
 * `sql` (a postgres.js instance: a tag function carrying its methods) as a plain function of its
 * own: calling it calls `call`, and its methods are `sql`'s but for `overrides`. For the wrappers
 * around the pool (src/db/pinned.ts, src/db/pool-usage.ts), which were Proxies: Bun calls
 * through a Proxy at about 0.3 µs even without a trap, and every statement and every fragment
 * (`sql`and x = ${y}``) is such a call: a contact create's statement, a dozen of them, took 16-25 µs
 * to build behind the two Proxies and 6-7 µs behind these. postgres.js's methods are closures over
 * the instance, not `this`, and its properties are plain values set once (Object.assign in its
 * constructor), so a copy behaves as the original.
 */
export function wrapSql<T extends object>(
  sql: T,
  call: (...args: unknown[]) => unknown,
  overrides: Record<string, unknown>,
): T {
  return Object.assign((...args: unknown[]) => call(...args), sql, overrides) as unknown as T;
}

import type { Config } from './config';
import type { Sql } from './db';

/**
 * What feature modules need from the process. Storage and the job queue are typed loosely here so
 * that modules which do not use them do not import their drivers.
 */
export interface Deps {
  readonly config: Config;
  readonly sql: Sql;
  readonly storage?: import('./storage/store').ObjectStore;
  readonly queue?: import('./imports/queue').ImportQueue;
  /** Tells the workers when the API is busy (src/imports/api-load.ts); absent in tests that build the app. */
  readonly load?: import('./imports/api-load').ApiLoadSignal;
  /** Refuses requests at once while the database is known away (src/db/circuit.ts); absent in most tests. */
  readonly circuit?: import('./db').DatabaseCircuit;
  /** Rate limits per account (src/ratelimit/limiter.ts); absent: none (RATE_LIMITS=false, most tests). */
  readonly limiter?: import('./ratelimit/limiter').RateLimiter;
  /**
   * Aborted when the process (or a test) is done with the app: it then ends what it opened beside
   * the pool, the cache listener's connections to a Citus cluster's other nodes (src/auth/cache.ts).
   */
  readonly stop?: AbortSignal;
  /**
   * Opens a pool like `sql` to another node of a Citus cluster, where the contact fast path sends an
   * account's statements (src/db/account-nodes.ts); absent: every statement goes through `sql`.
   */
  readonly nodePool?: import('./db').NodePoolFactory;
  /** Wakes the worker's event sequencer after a write that may have committed events (src/events/wake.ts). */
  readonly eventsHint?: import('./events/wake').EventsCommittedHint;
}

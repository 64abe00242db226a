// Embedded defaults: when DATABASE_URL / REDIS_URL are not configured, the project starts its own
// PostgreSQL cluster and redis-server under a data directory (dev, tests and CI need nothing else).
// Each service is reused while it runs; stop() only stops what this caller started.
export type { LocalService } from './ports';
export { freePort } from './ports';
export { ensureLocalCitus } from './citus';
export { ensureLocalPostgres } from './postgres';
export { ensureLocalRedis } from './redis';

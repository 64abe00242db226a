import type { Config } from '../config';
import { ensureLocalCitus, ensureLocalPostgres, ensureLocalRedis } from './index';

export interface Resolved {
  url: string;
  /** Stops what this call started (nothing when the URL was configured or already running). */
  stop(): Promise<void>;
}

const noop = async () => {};

/**
 * DATABASE_URL when configured, otherwise the embedded local PostgreSQL, or with CITUS_WORKERS the
 * embedded Citus cluster's coordinator (started or reused).
 */
export async function resolveDatabaseUrl(config: Config, log?: (msg: string) => void): Promise<Resolved> {
  if (config.databaseUrl) return { url: config.databaseUrl, stop: noop };
  const { dataDir, citusWorkers: workers, citusSrc } = config;
  const pg = workers
    ? await ensureLocalCitus({ dataDir, workers, citusSrc, log })
    : await ensureLocalPostgres({ dataDir, log });
  return { url: pg.url, stop: () => pg.stop() };
}

/** REDIS_URL when configured, otherwise the embedded local redis-server (started or reused). */
export async function resolveRedisUrl(config: Config, log?: (msg: string) => void): Promise<Resolved> {
  if (config.redisUrl) return { url: config.redisUrl, stop: noop };
  const redis = await ensureLocalRedis({ dataDir: config.dataDir, log });
  return { url: redis.url, stop: () => redis.stop() };
}

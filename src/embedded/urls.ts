import type { Config } from '../config';
import { ensureLocalPostgres, ensureLocalRedis } from './index';

export interface Resolved {
  url: string;
  /** Stops what this call started (nothing when the URL was configured or already running). */
  stop(): Promise<void>;
}

const noop = async () => {};

/** DATABASE_URL when configured, otherwise the embedded local PostgreSQL (started or reused). */
export async function resolveDatabaseUrl(config: Config, log?: (msg: string) => void): Promise<Resolved> {
  if (config.databaseUrl) return { url: config.databaseUrl, stop: noop };
  const pg = await ensureLocalPostgres({ dataDir: config.dataDir, log });
  return { url: pg.url, stop: () => pg.stop() };
}

/** REDIS_URL when configured, otherwise the embedded local redis-server (started or reused). */
export async function resolveRedisUrl(config: Config, log?: (msg: string) => void): Promise<Resolved> {
  if (config.redisUrl) return { url: config.redisUrl, stop: noop };
  const redis = await ensureLocalRedis({ dataDir: config.dataDir, log });
  return { url: redis.url, stop: () => redis.stop() };
}

import type { Config } from '../config';

/**
 * The environment `npm start` gives the API and the worker: its own, with the URLs of the
 * database and Redis it resolved (embedded or configured). Given a DATABASE_URL, the children can no
 * longer tell the embedded default from a configured database, so what depends on that is decided
 * here, from the environment `start` itself was given (its Config).
 */
export function childEnv(
  base: Record<string, string | undefined>,
  config: Config,
  urls: { database: string; redis: string },
): Record<string, string | undefined> {
  return {
    ...base,
    DATABASE_URL: urls.database,
    REDIS_URL: urls.redis,
    WEBHOOK_ALLOW_PRIVATE_URLS: String(config.webhookAllowPrivateUrls),
  };
}

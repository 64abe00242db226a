/** Config is read once from the environment into a typed, frozen object; a bad value names its variable. */
import { describe, expect, test } from 'bun:test';
import { childEnv } from '../src/cli/child-env';
import { ConfigError, loadConfig } from '../src/config';

describe('loadConfig', () => {
  test('defaults: local storage, 100k batches, two merge batches in flight, migrations at start, service name', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 3000,
      databasePoolSize: 10,
      importBatchSize: 100_000,
      importMergeConcurrency: 2,
      workerConcurrency: 4,
      migrateOnStart: true,
      appName: 'contact-service',
      logLevel: 'info',
      workerMetricsPort: 9464,
    });
    expect(c.storage.driver).toBe('local');
    expect(Object.isFrozen(c)).toBe(true);
  });

  test('values are parsed, booleans in their spellings', () => {
    const c = loadConfig({
      MIGRATE_ON_START: 'no',
      APP_NAME: ' bench-api ',
      IMPORT_MERGE_CONCURRENCY: '1',
      S3_BUCKET: 'b',
    });
    expect(c).toMatchObject({ migrateOnStart: false, appName: 'bench-api', importMergeConcurrency: 1 });
    expect(c.storage).toMatchObject({ driver: 's3', bucket: 'b', region: 'us-east-1' });
    expect(loadConfig({ MIGRATE_ON_START: 'TRUE' }).migrateOnStart).toBe(true);
  });

  test('rate limits: on by default at 20,000/s, burst 40,000; RATE_LIMITS=false turns them off', () => {
    expect(loadConfig({})).toMatchObject({ rateLimits: true, rateLimitPerSecond: 20_000, rateLimitBurst: 40_000 });
    const c = loadConfig({ RATE_LIMIT_PER_SECOND: '20', RATE_LIMIT_BURST: '5', RATE_LIMITS: 'false' });
    expect(c).toMatchObject({ rateLimits: false, rateLimitPerSecond: 20, rateLimitBurst: 5 });
    expect(() => loadConfig({ RATE_LIMIT_PER_SECOND: '0' })).toThrow(/RATE_LIMIT_PER_SECOND/);
    expect(() => loadConfig({ RATE_LIMIT_BURST: '1.5' })).toThrow(/RATE_LIMIT_BURST/);
  });

  test("WORKER_METRICS_PORT: the worker's /metrics port, 0 for no listener", () => {
    expect(loadConfig({ WORKER_METRICS_PORT: '9100' }).workerMetricsPort).toBe(9100);
    expect(loadConfig({ WORKER_METRICS_PORT: '0' }).workerMetricsPort).toBe(0);
  });

  test('events: EVENT_RETENTION_DAYS (7); WEBHOOK_ALLOW_PRIVATE_URLS on only for the embedded database', () => {
    expect(loadConfig({}).eventRetentionDays).toBe(7);
    expect(loadConfig({ EVENT_RETENTION_DAYS: '30' }).eventRetentionDays).toBe(30);
    expect(() => loadConfig({ EVENT_RETENTION_DAYS: '0' })).toThrow(/EVENT_RETENTION_DAYS/);
    expect(loadConfig({}).webhookAllowPrivateUrls).toBe(true);
    expect(loadConfig({ DATABASE_URL: 'postgres://db/x' }).webhookAllowPrivateUrls).toBe(false);
    expect(loadConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: 'false' }).webhookAllowPrivateUrls).toBe(false);
    expect(
      loadConfig({ DATABASE_URL: 'postgres://db/x', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }).webhookAllowPrivateUrls,
    ).toBe(true);
  });

  test("npm start's API and worker get the embedded default's WEBHOOK_ALLOW_PRIVATE_URLS with its URL", () => {
    const urls = { database: 'postgres://127.0.0.1:5999/contacts', redis: 'redis://127.0.0.1:6999' };
    const embedded = childEnv({ PORT: '3100' }, loadConfig({}), urls);
    expect(embedded).toMatchObject({ PORT: '3100', DATABASE_URL: urls.database, REDIS_URL: urls.redis });
    // What the children then read: private receivers allowed, as for `npm start` with nothing set.
    expect(loadConfig(embedded).webhookAllowPrivateUrls).toBe(true);
    const configured = { DATABASE_URL: 'postgres://db/x' };
    expect(loadConfig(childEnv(configured, loadConfig(configured), urls)).webhookAllowPrivateUrls).toBe(false);
    const refused = { WEBHOOK_ALLOW_PRIVATE_URLS: 'no' };
    expect(loadConfig(childEnv(refused, loadConfig(refused), urls)).webhookAllowPrivateUrls).toBe(false);
  });

  test('a bad value is a ConfigError naming the variable', () => {
    for (const [name, value] of [
      ['MIGRATE_ON_START', 'sometimes'],
      ['IMPORT_MERGE_CONCURRENCY', '0'],
      ['PORT', 'x'],
      ['LOG_LEVEL', 'loud'],
      ['WORKER_METRICS_PORT', '65536'],
      ['WORKER_METRICS_PORT', '-1'],
    ] as const) {
      const thrown = (() => {
        try {
          loadConfig({ [name]: value });
        } catch (e) {
          return e;
        }
      })();
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as Error).message).toContain(name);
    }
  });
});

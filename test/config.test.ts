/** Config is read once from the environment into a typed, frozen object; a bad value names its variable. */
import { describe, expect, test } from 'bun:test';
import { childEnv } from '../src/cli/child-env';
import { ConfigError, loadConfig } from '../src/config';
import { availableCores } from '../src/cpu-cores';

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

  test('S3: S3_REQUEST_TIMEOUT_MS (30000, 100-600000), S3_MAX_ATTEMPTS (5, 1-20), S3_PUBLIC_ENDPOINT (unset)', () => {
    const s3 = (env: Record<string, string>) => loadConfig({ S3_BUCKET: 'b', ...env }).storage;
    expect(s3({})).toMatchObject({ requestTimeoutMs: 30_000, maxAttempts: 5, publicEndpoint: undefined });
    expect(s3({ S3_REQUEST_TIMEOUT_MS: '100', S3_MAX_ATTEMPTS: '1' })).toMatchObject({
      requestTimeoutMs: 100,
      maxAttempts: 1,
    });
    expect(s3({ S3_REQUEST_TIMEOUT_MS: '600000', S3_MAX_ATTEMPTS: '20' })).toMatchObject({
      requestTimeoutMs: 600_000,
      maxAttempts: 20,
    });
    expect(() => s3({ S3_REQUEST_TIMEOUT_MS: '99' })).toThrow(/S3_REQUEST_TIMEOUT_MS/);
    expect(() => s3({ S3_REQUEST_TIMEOUT_MS: '600001' })).toThrow(/S3_REQUEST_TIMEOUT_MS/);
    expect(() => s3({ S3_MAX_ATTEMPTS: '0' })).toThrow(/S3_MAX_ATTEMPTS/);
    expect(() => s3({ S3_MAX_ATTEMPTS: '21' })).toThrow(/S3_MAX_ATTEMPTS/);
    // The address clients reach the store at, beside the one the processes use.
    expect(s3({ S3_ENDPOINT: 'http://minio:9000', S3_PUBLIC_ENDPOINT: ' http://localhost:9000 ' })).toMatchObject({
      endpoint: 'http://minio:9000',
      publicEndpoint: 'http://localhost:9000',
    });
    expect(s3({ S3_PUBLIC_ENDPOINT: '' })).toMatchObject({ publicEndpoint: undefined });
  });

  test('API processes: API_PROCESSES (the available cores, 1-64), API_METRICS_PORT (9470), API_PROCESS_INDEX', () => {
    expect(loadConfig({})).toMatchObject({
      apiProcesses: availableCores(),
      apiMetricsPort: 9470,
      apiProcessIndex: undefined,
    });
    expect(loadConfig({ API_PROCESSES: '1' }).apiProcesses).toBe(1);
    expect(loadConfig({ API_PROCESSES: '64' }).apiProcesses).toBe(64);
    expect(() => loadConfig({ API_PROCESSES: '0' })).toThrow(/API_PROCESSES/);
    expect(() => loadConfig({ API_PROCESSES: '65' })).toThrow(/API_PROCESSES/);
    expect(loadConfig({ API_METRICS_PORT: '9100' }).apiMetricsPort).toBe(9100);
    expect(loadConfig({ API_METRICS_PORT: '0' }).apiMetricsPort).toBe(0);
    expect(() => loadConfig({ API_METRICS_PORT: '65536' })).toThrow(/API_METRICS_PORT/);
    // Set by the launcher only: 0 is a process of a group (not "unset"), up to 63.
    expect(loadConfig({ API_PROCESS_INDEX: '0' }).apiProcessIndex).toBe(0);
    expect(loadConfig({ API_PROCESS_INDEX: '63' }).apiProcessIndex).toBe(63);
    expect(loadConfig({ API_PROCESS_INDEX: '' }).apiProcessIndex).toBeUndefined();
    expect(() => loadConfig({ API_PROCESS_INDEX: '64' })).toThrow(/API_PROCESS_INDEX/);
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
      ['API_PROCESSES', 'two'],
      ['API_METRICS_PORT', '-1'],
      ['API_PROCESS_INDEX', '1.5'],
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
    // The S3 variables are read only for the s3 driver.
    for (const [name, value] of [
      ['S3_REQUEST_TIMEOUT_MS', '30s'],
      ['S3_MAX_ATTEMPTS', '2.5'],
    ] as const) {
      expect(() => loadConfig({ S3_BUCKET: 'b', [name]: value })).toThrow(ConfigError);
      expect(() => loadConfig({ S3_BUCKET: 'b', [name]: value })).toThrow(name);
    }
  });
});

/** Config is read once from the environment into a typed, frozen object; a bad value names its variable. */
import { describe, expect, test } from 'bun:test';
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

  test("WORKER_METRICS_PORT: the worker's /metrics port, 0 for no listener", () => {
    expect(loadConfig({ WORKER_METRICS_PORT: '9100' }).workerMetricsPort).toBe(9100);
    expect(loadConfig({ WORKER_METRICS_PORT: '0' }).workerMetricsPort).toBe(0);
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

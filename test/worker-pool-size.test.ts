import { expect, test } from 'bun:test';
import { loadConfig } from '../src/config';
import { workerPoolSize } from '../worker/pool-size';

const config = (env: Record<string, string>) => loadConfig({ DATA_DIR: '/tmp', ...env });

test("the worker pool holds each run's connection, its dedupe parts and scan or merge batches, the sweeper", () => {
  // The defaults: 4 places (WORKER_CONCURRENCY) × (1 + 2 + 1) + 1 = 17, over DATABASE_POOL_SIZE 10.
  expect(workerPoolSize(config({}))).toBe(17);
  expect(workerPoolSize(config({ WORKER_CONCURRENCY: '1' }))).toBe(10); // 1 + 3 + 1 fits the default
  expect(workerPoolSize(config({ DATABASE_POOL_SIZE: '1', WORKER_CONCURRENCY: '1' }))).toBe(5);
  expect(
    workerPoolSize(config({ DATABASE_POOL_SIZE: '1', WORKER_CONCURRENCY: '1', IMPORT_MERGE_CONCURRENCY: '4' })),
  ).toBe(6);
  expect(workerPoolSize(config({ DATABASE_POOL_SIZE: '10', WORKER_CONCURRENCY: '4' }))).toBe(17);
  expect(workerPoolSize(config({ DATABASE_POOL_SIZE: '50', WORKER_CONCURRENCY: '4' }))).toBe(50);
});

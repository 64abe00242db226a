import { expect, test } from 'bun:test';
import { loadConfig } from '../src/config';
import { workerPoolSize } from '../worker/pool-size';

const config = (env: Record<string, string>) => loadConfig({ DATA_DIR: '/tmp', ...env });

test("the worker pool holds each run's reserved connection, its dedupe parts or merge batches, and the sweeper", () => {
  expect(workerPoolSize(config({}))).toBe(10); // the default already covers one import: 1 + 2 + 1
  expect(workerPoolSize(config({ DATABASE_POOL_SIZE: '1' }))).toBe(4);
  expect(workerPoolSize(config({ DATABASE_POOL_SIZE: '1', IMPORT_MERGE_CONCURRENCY: '4' }))).toBe(6);
  expect(workerPoolSize(config({ DATABASE_POOL_SIZE: '10', WORKER_CONCURRENCY: '4' }))).toBe(13);
  expect(workerPoolSize(config({ DATABASE_POOL_SIZE: '50', WORKER_CONCURRENCY: '4' }))).toBe(50);
});

import { expect, test } from 'bun:test';
import { loadConfig } from '../../src/config';
import { workerPoolSize } from '../../worker/pool-size';

const config = (env: Record<string, string>) => loadConfig({ DATA_DIR: '/tmp', ...env });

test("the worker pool holds each run's connection, its dedupe parts or merge batches and helpers, the rest", () => {
  // The defaults: 4 places (WORKER_CONCURRENCY) × (1 + max(2 + 1, 2 + 2)) + 6 = 26, over DATABASE_POOL_SIZE 10:
  // per run its own connection, then 2 batches, the duplicate scan and the plan VACUUM beside them;
  // the sweeper, the event sequencer, the webhook relay, the contact export's COPY and its helper,
  // and the staging pool's upkeep.
  expect(workerPoolSize(config({}))).toBe(26);
  expect(workerPoolSize(config({ WORKER_CONCURRENCY: '1' }))).toBe(11); // 1 + 4 + 6
  expect(workerPoolSize(config({ DATABASE_POOL_SIZE: '1', WORKER_CONCURRENCY: '1' }))).toBe(11);
  expect(
    workerPoolSize(config({ DATABASE_POOL_SIZE: '1', WORKER_CONCURRENCY: '1', IMPORT_MERGE_CONCURRENCY: '4' })),
  ).toBe(13);
  expect(workerPoolSize(config({ DATABASE_POOL_SIZE: '10', WORKER_CONCURRENCY: '4' }))).toBe(26);
  expect(workerPoolSize(config({ DATABASE_POOL_SIZE: '50', WORKER_CONCURRENCY: '4' }))).toBe(50);
});

import type { Queue } from 'bullmq';
import type { Counter, Registry } from 'prom-client';
import type { Sql } from '../db';
import { registerImportPipelineMetrics } from './import-pipeline';
import { poolGauges } from './pool';
import { queueGauges, stalledJobsCounter } from './queue';
import { processRegistry } from './registry';
import { stagingSetsGauge } from './staging-sets';
import { registerWebhookMetrics } from './webhooks';

/** What the worker's GET /metrics shows, and the stalled-job counter its workers' events feed. */
export interface WorkerMetrics {
  registry: Registry;
  stalledJobs: Counter<'queue'>;
}

/**
 * The worker's metrics: its imports' rows, phases and ends, its queues, the staging pool, its pool
 * and the process.
 */
export function workerMetrics(sql: Sql, queues: readonly Queue[]): WorkerMetrics {
  const registry = processRegistry();
  registerImportPipelineMetrics(registry);
  registerWebhookMetrics(registry, sql);
  queueGauges(registry, queues);
  const stalledJobs = stalledJobsCounter(registry);
  for (const q of queues) stalledJobs.inc({ queue: q.name }, 0);
  poolGauges(registry, sql);
  stagingSetsGauge(registry, sql);
  return { registry, stalledJobs };
}

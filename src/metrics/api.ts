import type { Registry } from 'prom-client';
import type { Deps } from '../deps';
import { BullImportQueue } from '../imports/bullmq-queue';
import { circuitGauge } from './circuit';
import { exportStatusGauge } from './export-status';
import { HttpMetrics } from './http';
import { importStatusGauge } from './import-status';
import { poolGauges } from './pool';
import { queueGauges } from './queue';
import { rateLimitMetrics } from './rate-limits';
import { processRegistry } from './registry';

/** What the API's GET /metrics shows, and the request metrics src/http/server.ts feeds. */
export interface ApiMetrics {
  registry: Registry;
  http: HttpMetrics;
}

/**
 * The API's metrics: requests, contact imports and exports by status, its database circuit, its pool,
 * the process, and the import queue's jobs when the API has a BullMQ queue (so a backlog shows even
 * while no worker runs).
 */
export function apiMetrics(deps: Deps): ApiMetrics {
  const registry = processRegistry();
  const http = new HttpMetrics(registry);
  importStatusGauge(registry, deps.sql);
  exportStatusGauge(registry, deps.sql);
  if (deps.circuit) circuitGauge(registry, deps.circuit);
  poolGauges(registry, deps.sql);
  if (deps.queue instanceof BullImportQueue) queueGauges(registry, [deps.queue.queue]);
  if (deps.limiter) rateLimitMetrics(registry, deps.limiter.stats);
  return { registry, http };
}

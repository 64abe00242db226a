import { collectDefaultMetrics, Registry } from 'prom-client';

/** Every metric of the service starts with this. */
export const PREFIX = 'contact_service_';

/**
 * prom-client's default metrics that mean what they say under Bun: CPU time, resident memory, open
 * file descriptors, start time and event-loop lag. Its V8 heap-space, GC and active-handle metrics
 * read zeros or JavaScriptCore figures under another name here, and are left out.
 */
const PROCESS_METRICS = [
  'process_cpu_',
  'process_start_time_seconds',
  'process_resident_memory_bytes',
  'process_open_fds',
  'process_max_fds',
  'nodejs_eventloop_lag_',
].map((name) => PREFIX + name);

/**
 * The process's own registry (not prom-client's global one, so two servers in one test process do
 * not share counters), with the process metrics above.
 */
export function processRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: PREFIX });
  for (const metric of registry.getMetricsAsArray()) {
    const name = metric.name;
    if (!PROCESS_METRICS.some((kept) => name === kept || (kept.endsWith('_') && name.startsWith(kept))))
      registry.removeSingleMetric(name);
  }
  return registry;
}

/** GET /metrics: the registry in Prometheus text format (text/plain; version=0.0.4). */
export async function exposition(registry: Registry): Promise<Response> {
  return new Response(await registry.metrics(), { headers: { 'content-type': registry.contentType } });
}

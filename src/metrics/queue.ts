import type { Queue } from 'bullmq';
import { Counter, Gauge, type Registry } from 'prom-client';
import { PREFIX } from './registry';
import { scrapeSource } from './scrape';

const STATES = ['waiting', 'active', 'delayed', 'failed'] as const;

/**
 * Jobs of each BullMQ queue by state, read from Redis at scrape time (Queue#getJobCounts, one
 * script call per queue). `waiting` counts every job ready for a worker: waiting, prioritized, and
 * paused in a paused queue. The figures are the queue's, not the process's: every process that
 * shows them shows the same ones (aggregate with max, not sum).
 */
export function queueGauges(registry: Registry, queues: readonly Queue[]): void {
  const reads = queues.map((queue) => ({
    name: queue.name,
    read: scrapeSource(`queue ${queue.name}`, () =>
      queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed'),
    ),
  }));
  new Gauge({
    name: `${PREFIX}queue_jobs`,
    help: 'BullMQ jobs by queue and state (waiting, active, delayed, failed), as Redis holds them now.',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      const counts = await Promise.all(reads.map(async (q) => ({ queue: q.name, counts: await q.read() })));
      for (const { queue, counts: c } of counts) {
        if (!c) continue;
        const of = (k: string) => c[k] ?? 0;
        for (const state of STATES) {
          const n = state === 'waiting' ? of('waiting') + of('prioritized') + of('paused') : of(state);
          this.set({ queue, state }, n);
        }
      }
    },
  });
}

/**
 * Jobs a worker's stalled-job check found with a lapsed lock (their worker died or its event loop
 * was blocked) and put back to wait, by queue. The check moves each stalled job once, in one
 * Redis script, so the sum over worker processes counts every stall once. A job that stalls more
 * than maxStalledCount times fails instead, and shows in the failed jobs.
 */
export function stalledJobsCounter(registry: Registry): Counter<'queue'> {
  return new Counter({
    name: `${PREFIX}queue_stalled_jobs_total`,
    help: "Jobs this worker's stalled-job check found with a lapsed lock and put back to wait, by queue.",
    labelNames: ['queue'],
    registers: [registry],
  });
}

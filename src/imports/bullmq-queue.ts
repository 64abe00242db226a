import { Queue } from 'bullmq';
import IORedis, { type Redis } from 'ioredis';
import type { EnsureOutcome, ImportQueue } from './queue';
import { IMPORT_JOB, IMPORT_JOB_OPTIONS, IMPORT_QUEUE, type ImportJobData } from './jobs';

export interface QueueOptions {
  /** BullMQ key prefix; tests give each file its own. */
  prefix?: string;
}

/** An ioredis connection as BullMQ wants it: blocking commands must not fail after N retries. */
export function redisConnection(redisUrl: string): Redis {
  return new IORedis(redisUrl, { maxRetriesPerRequest: null });
}

/** The import queue over BullMQ. The job id is the import id, so enqueueing twice adds one job. */
export class BullImportQueue implements ImportQueue {
  readonly queue: Queue<ImportJobData>;

  constructor(
    private readonly connection: Redis,
    opts: QueueOptions = {},
  ) {
    this.queue = new Queue<ImportJobData>(IMPORT_QUEUE, {
      connection,
      ...(opts.prefix && { prefix: opts.prefix }),
      defaultJobOptions: IMPORT_JOB_OPTIONS,
    });
  }

  async enqueueImport(accountId: string, importId: string): Promise<void> {
    await this.queue.add(IMPORT_JOB, { accountId, importId }, { jobId: importId });
  }

  async ensureImport(accountId: string, importId: string, stillOpen: () => Promise<boolean>): Promise<EnsureOutcome> {
    const job = await this.queue.getJob(importId);
    const state = job ? await job.getState() : 'unknown';
    if (state !== 'completed' && state !== 'failed' && state !== 'unknown') return 'live';
    // A job finishes after runImport committed the final status, so an import that Postgres still
    // calls open *after* we saw its job finished really has no job: retries ran out, or Redis lost it.
    if (!(await stillOpen())) return 'closed';
    if (!job) {
      await this.enqueueImport(accountId, importId);
      return 'added';
    }
    // Removing fails harmlessly if another sweeper replaced it first; the add is then a no-op.
    await job.remove().catch(() => {});
    await this.enqueueImport(accountId, importId);
    return 'replaced';
  }

  ping(): Promise<unknown> {
    return this.connection.ping();
  }

  async close(): Promise<void> {
    await this.queue.close();
    await this.connection.quit().catch(() => this.connection.disconnect());
  }
}

export function createImportQueue(redisUrl: string, opts: QueueOptions = {}): BullImportQueue {
  return new BullImportQueue(redisConnection(redisUrl), opts);
}

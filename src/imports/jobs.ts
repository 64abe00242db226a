import type { JobsOptions } from 'bullmq';

/**
 * Queue and job names shared by the API (producer) and the worker (consumer). The worker checks at
 * start-up that every job name here has exactly one handler.
 */
export const IMPORT_QUEUE = 'contact-import';
export const IMPORT_JOB = 'import';

/**
 * The sweeper has its own queue so a long import never delays it (a worker with concurrency 1 on
 * one queue would hold the sweep until the import ends).
 */
export const SWEEP_QUEUE = 'upload-sweep';
export const SWEEP_JOB = 'upload-sweep';
/** Fixed scheduler id: every worker process upserts the same one, so one sweep runs per interval. */
export const SWEEP_SCHEDULER_ID = 'upload-sweep';
export const SWEEP_EVERY_MS = 5_000;

export const JOB_NAMES: Record<string, readonly string[]> = {
  [IMPORT_QUEUE]: [IMPORT_JOB],
  [SWEEP_QUEUE]: [SWEEP_JOB],
};

export interface ImportJobData {
  accountId: string;
  importId: string;
}

/**
 * Transient failures (connection loss, deadlocks) retry with exponential backoff: 5 s doubling over
 * 10 attempts covers about 40 minutes of outage. If that is not enough the sweeper re-enqueues the
 * import, because Postgres still says it is open. History is bounded so Redis does not grow.
 */
export const IMPORT_JOB_OPTIONS: JobsOptions = {
  attempts: 10,
  backoff: { type: 'exponential', delay: 5_000 },
  removeOnComplete: { count: 1_000, age: 7 * 24 * 3600 },
  removeOnFail: { count: 5_000, age: 30 * 24 * 3600 },
};

export const SWEEP_JOB_OPTIONS: JobsOptions = {
  removeOnComplete: { count: 10 },
  removeOnFail: { count: 100 },
};

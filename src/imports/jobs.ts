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

/**
 * How fast a dead worker's import moves on. A running job's lock in Redis lasts IMPORT_LOCK_MS and
 * BullMQ renews it every IMPORT_LOCK_RENEW_MS or so. A killed worker stops renewing; once its lock
 * has lapsed, a stalled-job check (every STALLED_CHECK_MS, run by any live or restarted worker,
 * and two checks are needed: one marks the active job, the next moves it if its lock is gone)
 * puts the job back in wait for the next free worker. The old 5-minute lock made a killed
 * worker's import sit still for 5 minutes while the account's single writes got 409.
 *
 * The lock must outlive the longest time the worker's event loop cannot run its renewal timer:
 * the heavy work happens in PostgreSQL (awaited, the loop keeps turning) and the CSV is parsed one
 * stream chunk at a time, so the loop never stalls for seconds; 15 s leaves about 10 s of margin
 * after a renewal that comes 5 s late. A lock that lapses anyway costs nothing but time: the job
 * is handed to another worker, which finds the import's PostgreSQL session lock taken and waits.
 */
export const IMPORT_LOCK_MS = 15_000;
export const IMPORT_LOCK_RENEW_MS = 5_000;
export const STALLED_CHECK_MS = 5_000;
/**
 * The longest a killed worker's import waits, from its last renewal, before a worker picks its job
 * up again: the lock lapsing, then at most two stalled checks. Retry-After estimates use it.
 */
export const STALLED_RESUME_MS = IMPORT_LOCK_MS + 2 * STALLED_CHECK_MS;
/** How soon a job whose import another worker is still running (ImportBusyError) looks again. */
export const BUSY_RECHECK_MS = 2_000;
/**
 * How soon a job whose account is suspended looks again: the import waits, open, without spending a
 * retry, and runs within this long of the account being unsuspended (one primary-key read a look).
 */
export const SUSPENDED_RECHECK_MS = 5_000;

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

import { errorFields, log } from '../src/log';

/**
 * BullMQ's words for a job whose lock or key in Redis is gone, or belongs to another run of it
 * (bullmq 5.81: Scripts.finishedErrors for moveToFinished and moveToDelayed, LockManager for the
 * renewal). Redis lost its data (restarted without persistence, a failover to an empty replica, a
 * flush), or the job's lock lapsed and the stalled-job check gave the job to another run. Neither
 * is a fault of the worker: PostgreSQL holds every import's state. "Missing key for parent job" and
 * "Job … is not in the active state" are not these and stay errors.
 */
const LOST_JOB_STATE =
  /^(?:Missing lock for job|could not renew lock for job|Lock mismatch for job|Missing key for job) (.+?)(?:\. |$)/;

/**
 * The job's id when `error` is BullMQ saying that the job's lock or key is lost (see LOST_JOB_STATE),
 * else undefined.
 *
 * @example lostJobId(new Error('Missing lock for job 5f6b…. moveToFinished')) // '5f6b…'
 */
export function lostJobId(error: unknown): string | undefined {
  return error instanceof Error ? LOST_JOB_STATE.exec(error.message)?.[1] : undefined;
}

/**
 * The handler of a BullMQ worker's 'error' event: a lost job state is a warning that says what
 * happens about it (`action`; `then` does it, if something is to be done), anything else an error.
 * A run whose lock is lost fails to renew it every few seconds until it ends: the first failure
 * per run is a warning, the repeats are debug lines. The run's end always meets the lost lock too
 * (moveToFinished or moveToDelayed), which closes the run's warnings.
 */
export function workerErrorLog(name: string, action: string, then?: (jobId: string) => void): (e: Error) => void {
  const renewalsWarned = new Set<string>();
  return (e) => {
    const jobId = lostJobId(e);
    if (jobId === undefined) return log('error', `${name} worker error`, errorFields(e));
    const renewal = e.message.startsWith('could not renew');
    if (renewal && renewalsWarned.has(jobId)) return log('debug', `${name} job lock still lost`, { jobId });
    if (renewal) renewalsWarned.add(jobId);
    else renewalsWarned.delete(jobId);
    log('warn', `${name} job's lock or key lost with Redis' data (or a lapsed lock); ${action}`, {
      jobId,
      error: e.message,
    });
    then?.(jobId);
  };
}

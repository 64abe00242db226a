import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { errorFields, log } from '../src/log';
import { SWEEP_EVERY_MS, SWEEP_JOB, SWEEP_JOB_OPTIONS, SWEEP_SCHEDULER_ID } from '../src/imports/jobs';

/** How often a worker looks whether the sweep's scheduler is still in Redis (a FLUSHALL drops no connection). */
const CHECK_EVERY_MS = 30_000;

/**
 * Keeps the repeating `upload-sweep` job in Redis for as long as the worker runs. A job scheduler
 * lives only in Redis: a Redis restarted without its data (no persistence, a failover to an empty
 * replica, a flush) has forgotten it, and while it is gone nothing moves S3 arrivals, expires
 * unused uploads or re-enqueues imports whose jobs were lost with it. So the scheduler is upserted
 * at start, again every time `connection` is ready after a reconnect, and whenever the periodic
 * check finds it missing. Every worker upserts the same scheduler id: one sweep per interval.
 *
 * Returns the first upsert (the worker awaits it at start), `check` to look for the scheduler now
 * and upsert it if missing (a sweep job found lost with Redis' data), and a stop function for
 * shutdown.
 */
export function keepSweepScheduler(
  queue: Queue,
  connection: Redis,
): { started: Promise<void>; check(why: string): void; stop(): void } {
  const upsert = async (why: string) => {
    await queue.upsertJobScheduler(
      SWEEP_SCHEDULER_ID,
      { every: SWEEP_EVERY_MS },
      { name: SWEEP_JOB, opts: SWEEP_JOB_OPTIONS },
    );
    if (why !== 'start') log('warn', 'upload sweep scheduler created again', { why });
  };
  const upsertLogged = (why: string) =>
    void upsert(why).catch((e) =>
      log('warn', 'upload sweep scheduler upsert failed; retried on the next check', { why, ...errorFields(e) }),
    );

  let connectedBefore = connection.status === 'ready';
  const onReady = () => {
    // The first 'ready' is the start-up connection, which `started` covers.
    if (connectedBefore) upsertLogged('redis reconnected');
    connectedBefore = true;
  };
  connection.on('ready', onReady);
  const check = (why: string) =>
    void queue
      .getJobScheduler(SWEEP_SCHEDULER_ID)
      .then((s) => (s ? undefined : upsertLogged(why)))
      .catch(() => {}); // Redis unreachable: the reconnect's 'ready' upserts
  const timer = setInterval(() => check('scheduler missing'), CHECK_EVERY_MS);
  timer.unref();
  return {
    started: upsert('start'),
    check,
    stop() {
      clearInterval(timer);
      connection.off('ready', onReady);
    },
  };
}

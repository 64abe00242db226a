/**
 * Redis faults (issue "Hardening", builds 4 and 9): redis-server SIGKILLed mid-import and started
 * again on the same port with its data gone. The import ends `success` like an uninterrupted run,
 * its lost job is enqueued again within seconds, and the repeating upload sweep comes back (it
 * lives only in Redis): a NEW upload afterwards, which nobody enqueues, is picked up and imported.
 * The worker logs the jobs' lost locks and keys as the expected warnings they are (issue 39), not
 * as errors.
 *
 * Each test prints one JSON line (fault, phase, recovery time) for the hardening notes.
 */
import { expect, spyOn, test } from 'bun:test';
import { Queue, Worker } from 'bullmq';
import { readFile } from 'node:fs/promises';
import { createImportQueue, redisConnection } from '../../src/imports/bullmq-queue';
import { lostJobId, workerErrorLog } from '../../worker/redis-loss';
import {
  dbNow,
  enqueue,
  midPhase,
  movingAgain,
  outcome,
  referenceBed,
  stageFaultImport,
  until,
} from '../helpers/fault-import';

/** "Within seconds": a reconnect and two sweep intervals. */
const REQUEUED_WITHIN_MS = 15_000;

const suite = referenceBed();

/**
 * Milliseconds until Redis holds a job for the import again (the sweep re-enqueued it), or
 * undefined when the worker, which kept running it, finished it first (nothing to re-enqueue).
 */
async function jobBack(accountId: string, importId: string, since: number): Promise<number | undefined> {
  const queue = createImportQueue(suite.bed.redisUrl);
  try {
    const back = await until(
      'the import job back in Redis, or the import ended',
      async () => {
        if (await queue.queue.getJob(importId)) return 'job';
        const [row] = await suite.bed.sql`
          select 1 from contact_imports
          where account_id = ${accountId} and id = ${importId} and status in ('success', 'failed')`;
        return row ? 'ended' : undefined;
      },
      REQUEUED_WITHIN_MS + 15_000,
    );
    return back === 'job' ? Date.now() - since : undefined;
  } finally {
    await queue.close();
  }
}

/** BullMQ's words for a job whose Redis state went with Redis' data (worker/redis-loss.ts). */
const LOST_STATE = /Missing lock for job|could not renew lock|Lock mismatch for job|Missing key for job/;

/** The worker's JSON log lines (its log file holds stdout and stderr). */
async function logLines(log: string): Promise<Record<string, unknown>[]> {
  return (await readFile(log, 'utf8'))
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

for (const phase of ['read', 'merge'] as const) {
  test(
    `Redis killed in ${phase} and restarted empty: the import ends like an uninterrupted run, ` +
      'its job comes back, and a new upload is swept and imported',
    async () => {
      const worker = await suite.bed.start('worker');
      try {
        const { accountId, importId } = await stageFaultImport(suite.bed, suite.csv);
        await enqueue(suite.bed, accountId, importId);
        await midPhase(suite.bed.sql, importId, phase);
        await suite.bed.killRedis();
        const killedAt = await dbNow(suite.bed.sql);
        await suite.bed.startRedis();
        const restartedAt = Date.now();
        const requeuedMs = await jobBack(accountId, importId, restartedAt);
        const recoveryMs = await movingAgain(suite.bed.sql, importId, killedAt);
        const got = await outcome(suite.bed.sql, accountId, importId);

        // Nobody enqueues this one: only the sweep, which Redis forgot, can start it.
        const next = await stageFaultImport(suite.bed, suite.csv);
        const nextGot = await outcome(suite.bed.sql, next.accountId, next.importId, 30_000);
        console.log(
          JSON.stringify({
            fault: 'redis kill -9, restarted empty',
            phase,
            recoveryMs,
            requeuedMs,
            countsEqual: JSON.stringify(got) === JSON.stringify(suite.reference),
            newUpload: nextGot.status,
          }),
        );
        expect(requeuedMs ?? 0).toBeLessThan(REQUEUED_WITHIN_MS);
        expect(got).toEqual(suite.reference);
        expect(nextGot).toEqual(suite.reference);
        expect(await suite.bed.tail(worker, 400)).not.toContain('exiting');

        // The running import's job went with Redis' data: its lock or its key is missing when the run
        // ends (and its renewals fail if it runs for long). Warnings that say what happens, not errors.
        const lines = await logLines(worker.log);
        expect(lines.filter((l) => l.level === 'error' && LOST_STATE.test(JSON.stringify(l)))).toEqual([]);
        const lost = lines.filter((l) => l.jobId === importId && LOST_STATE.test(String(l.error)));
        expect(lost.length).toBeGreaterThan(0);
        for (const l of lost) {
          expect(l.level).toBe('warn');
          expect(l.msg).toMatch(/goes on against PostgreSQL and the sweep re-enqueues it/);
        }
      } finally {
        await suite.bed.kill(worker);
      }
    },
    90_000,
  );
}

test("BullMQ's errors for a job's lost or taken lock and lost key are the ones the worker warns about", async () => {
  // A job per state, each running until released: the renewal's lock deleted, the lock another
  // run's, the job's key deleted (what a Redis that lost its data, or a lapsed lock, leaves).
  const prefix = 'lost-state';
  const connection = redisConnection(suite.bed.redisUrl);
  const workerConnection = redisConnection(suite.bed.redisUrl);
  const queue = new Queue('q', { connection, prefix });
  const release = new Map<string, () => void>();
  const worker = new Worker('q', (job) => new Promise<void>((resolve) => release.set(job.id!, resolve)), {
    connection: workerConnection,
    prefix,
    concurrency: 3,
    lockDuration: 10_000,
    lockRenewTime: 200,
    skipStalledCheck: true,
  });
  const errors: Error[] = [];
  worker.on('error', (e) => errors.push(e));
  const ids = ['lock-gone', 'lock-taken', 'key-gone'];
  try {
    await Promise.all(ids.map((jobId) => queue.add('job', {}, { jobId })));
    await until('the jobs running', async () => release.size === ids.length);
    await connection.del(`${prefix}:q:lock-gone:lock`);
    await until('a refused renewal', async () => errors.length > 0);
    await connection.set(`${prefix}:q:lock-taken:lock`, 'another-run');
    await connection.del(`${prefix}:q:key-gone`, `${prefix}:q:key-gone:lock`);
    for (const end of release.values()) end();
    await until(
      "every run's end refused",
      async () => errors.filter((e) => e.message.includes('moveToFinished')).length >= 3,
    );
  } finally {
    await worker.close();
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    // Connections given to BullMQ are the giver's to close.
    for (const c of [connection, workerConnection]) await c.quit().catch(() => c.disconnect());
  }
  const messages = errors.map((e) => e.message);
  expect(messages).toContain('could not renew lock for job lock-gone');
  expect(messages).toContain('Missing lock for job lock-gone. moveToFinished');
  expect(messages).toContain('Lock mismatch for job lock-taken. Cmd moveToFinished from active');
  expect(messages).toContain('Missing key for job key-gone. moveToFinished');
  for (const e of errors) expect(ids).toContain(lostJobId(e)!);

  expect(lostJobId(new Error('Missing key for job repeat:upload-sweep:1700000005000. moveToFinished'))).toBe(
    'repeat:upload-sweep:1700000005000',
  );
  // Not a lost job state: these stay errors.
  for (const message of [
    'Missing key for parent job bull:q:p. moveToFinished',
    'Job j is not in the active state. moveToFinished',
    'connect ECONNREFUSED 127.0.0.1:6379',
  ])
    expect(lostJobId(new Error(message))).toBeUndefined();
});

test("a run's lost lock is one warning, not one per refused renewal; other errors stay errors", () => {
  const lines: Record<string, unknown>[] = [];
  const stderr = spyOn(console, 'error').mockImplementation((line: string) => lines.push(JSON.parse(line)));
  const acted: string[] = [];
  try {
    const onError = workerErrorLog('import', 'what happens about it', (jobId) => acted.push(jobId));
    for (const message of [
      'could not renew lock for job a',
      'could not renew lock for job a',
      'could not renew lock for job b',
      'could not renew lock for job a',
      'Missing lock for job a. moveToFinished',
      'could not renew lock for job a', // a later run of the job
      'Missing key for parent job bull:q:p. moveToFinished',
    ])
      onError(new Error(message));
  } finally {
    stderr.mockRestore();
  }
  expect(lines.map((l) => [l.level, l.jobId ?? l.error])).toEqual([
    ['warn', 'a'],
    ['warn', 'b'],
    ['warn', 'a'],
    ['warn', 'a'],
    ['error', 'Missing key for parent job bull:q:p. moveToFinished'],
  ]);
  expect(lines[0]!.msg).toMatch(/^import job's lock or key lost .*; what happens about it$/);
  expect(acted).toEqual(['a', 'b', 'a', 'a']);
});

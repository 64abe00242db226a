/**
 * Redis faults (issue "Hardening", builds 4 and 9): redis-server SIGKILLed mid-import and started
 * again on the same port with its data gone. The import ends `success` like an uninterrupted run,
 * its lost job is enqueued again within seconds, and the repeating upload sweep comes back (it
 * lives only in Redis): a NEW upload afterwards, which nobody enqueues, is picked up and imported.
 *
 * Each test prints one JSON line (fault, phase, recovery time) for the hardening notes.
 */
import { expect, test } from 'bun:test';
import { createImportQueue } from '../src/imports/bullmq-queue';
import {
  dbNow,
  enqueue,
  midPhase,
  movingAgain,
  outcome,
  referenceBed,
  stageFaultImport,
  until,
} from './helpers/fault-import';

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
      } finally {
        await suite.bed.kill(worker);
      }
    },
    90_000,
  );
}

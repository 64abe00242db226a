/**
 * Redis faults (issue "Hardening", builds 4 and 9): redis-server SIGKILLed mid-import and started
 * again on the same port with its data gone. The import ends `success` like an uninterrupted run,
 * its lost job is enqueued again within seconds, and the repeating upload sweep comes back (it
 * lives only in Redis): a NEW upload afterwards, which nobody enqueues, is picked up and imported.
 *
 * Each test prints one JSON line (fault, phase, recovery time) for the hardening notes.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { createImportQueue } from '../src/imports/bullmq-queue';
import { faultBed, type FaultBed } from './helpers/fault-bed';
import { dbNow, enqueue, FAULT_BED_ENV, faultCsv, midPhase, movingAgain, outcome, referenceRun, stageFaultImport, until, type Outcome } from './helpers/fault-import';

/** "Within seconds": a reconnect and two sweep intervals. */
const REQUEUED_WITHIN_MS = 15_000;

let bed: FaultBed;
let csv: string;
let reference: Outcome;

beforeAll(async () => {
  bed = await faultBed(FAULT_BED_ENV);
  csv = faultCsv();
  reference = await referenceRun(bed, csv);
  expect(reference).toMatchObject({ status: 'success', failureReason: null });
}, 180_000);

afterAll(async () => {
  await bed?.stop();
});

/**
 * Milliseconds until Redis holds a job for the import again (the sweep re-enqueued it), or
 * undefined when the worker, which kept running it, finished it first (nothing to re-enqueue).
 */
async function jobBack(accountId: string, importId: string, since: number): Promise<number | undefined> {
  const queue = createImportQueue(bed.redisUrl);
  try {
    const back = await until('the import job back in Redis, or the import ended', async () => {
      if (await queue.queue.getJob(importId)) return 'job';
      const [row] = await bed.sql`select 1 from contact_imports where account_id = ${accountId} and id = ${importId} and status in ('success', 'failed')`;
      return row ? 'ended' : undefined;
    }, REQUEUED_WITHIN_MS + 15_000);
    return back === 'job' ? Date.now() - since : undefined;
  } finally {
    await queue.close();
  }
}

for (const phase of ['read', 'merge'] as const) {
  test(`Redis killed in ${phase} and restarted empty: the import ends like an uninterrupted run, its job comes back, and a new upload is swept and imported`, async () => {
    const worker = await bed.start('worker');
    try {
      const { accountId, importId } = await stageFaultImport(bed, csv);
      await enqueue(bed, accountId, importId);
      await midPhase(bed.sql, importId, phase);
      await bed.killRedis();
      const killedAt = await dbNow(bed.sql);
      await bed.startRedis();
      const restartedAt = Date.now();
      const requeuedMs = await jobBack(accountId, importId, restartedAt);
      const recoveryMs = await movingAgain(bed.sql, importId, killedAt);
      const got = await outcome(bed.sql, accountId, importId);

      // Nobody enqueues this one: only the sweep, which Redis forgot, can start it.
      const next = await stageFaultImport(bed, csv);
      const nextGot = await outcome(bed.sql, next.accountId, next.importId, 30_000);
      console.log(JSON.stringify({ fault: 'redis kill -9, restarted empty', phase, recoveryMs, requeuedMs, countsEqual: JSON.stringify(got) === JSON.stringify(reference), newUpload: nextGot.status }));
      expect(requeuedMs ?? 0).toBeLessThan(REQUEUED_WITHIN_MS);
      expect(got).toEqual(reference);
      expect(nextGot).toEqual(reference);
      expect(await bed.tail(worker, 400)).not.toContain('exiting');
    } finally {
      await bed.kill(worker);
    }
  }, 90_000);
}

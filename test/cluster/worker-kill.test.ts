/**
 * A worker SIGKILLed mid-import on the Citus cluster: a restarted worker resumes the import from its
 * last committed batch, and it ends with the counts and contacts of an uninterrupted run of the same
 * file on the same cluster (every batch applied exactly once). As test/fault-worker.test.ts does on
 * one PostgreSQL, with the import's staging distributed and its statements run on the account's node.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { Child, ProcessBed } from '../helpers/fault-bed';
import { clusterBed } from '../helpers/cluster-bed';
import {
  dbNow,
  enqueue,
  FAULT_BED_ENV,
  faultCsv,
  midPhase,
  movingAgain,
  outcome,
  referenceRun,
  stageFaultImport,
  type Outcome,
} from '../helpers/fault-import';

const RESUME_WITHIN_MS = 30_000;
let bed: ProcessBed;
let csv: string;
let reference: Outcome;

beforeAll(async () => {
  bed = await clusterBed(FAULT_BED_ENV);
  csv = faultCsv();
  reference = await referenceRun(bed, csv);
  expect(reference).toMatchObject({ status: 'success', failureReason: null });
}, 180_000);

afterAll(async () => {
  await bed?.stop();
});

for (const phase of ['read', 'merge'] as const) {
  test(`killed in ${phase} on the cluster: a restarted worker ends the import like an uninterrupted run`, async () => {
    const alive: Child[] = [];
    try {
      const { accountId, importId } = await stageFaultImport(bed, csv);
      const first = await bed.start('worker', { APP_NAME: 'worker-a' });
      alive.push(first);
      await enqueue(bed, accountId, importId);
      await midPhase(bed.sql, importId, phase);
      await bed.kill(first);
      const killedAt = await dbNow(bed.sql);
      alive.push(await bed.start('worker', { APP_NAME: 'worker-b' }));
      const recoveryMs = await movingAgain(bed.sql, importId, killedAt, RESUME_WITHIN_MS + 15_000);
      const got = await outcome(bed.sql, accountId, importId);
      console.log(
        JSON.stringify({
          fault: 'worker kill -9 on the cluster, restarted worker',
          phase,
          recoveryMs,
          countsEqual: JSON.stringify(got) === JSON.stringify(reference),
        }),
      );
      expect(recoveryMs).toBeLessThan(RESUME_WITHIN_MS);
      expect(got).toEqual(reference);
    } finally {
      for (const c of alive) await bed.kill(c);
    }
  }, 120_000);
}

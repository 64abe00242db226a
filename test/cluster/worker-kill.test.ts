/**
 * A worker SIGKILLed mid-import on the Citus cluster: a restarted worker resumes the import from its
 * last committed batch, and it ends with the counts and contacts of an uninterrupted run of the same
 * file on the same cluster (every batch applied exactly once). As test/faults/fault-worker.test.ts does on
 * one PostgreSQL, with the import's staging distributed and its statements run on the account's node.
 */
import { test } from 'bun:test';
import type { Child } from '../helpers/fault-bed';
import { clusterBed } from '../helpers/cluster-bed';
import {
  enqueue,
  expectResumedAfterKill,
  FAULT_BED_ENV,
  midPhase,
  referenceBed,
  stageFaultImport,
} from '../helpers/fault-import';

// The cluster bed, the file and its uninterrupted run, made before the tests and removed after.
const suite = referenceBed(() => clusterBed(FAULT_BED_ENV));

for (const phase of ['read', 'merge'] as const) {
  test(`killed in ${phase} on the cluster: a restarted worker ends the import like an uninterrupted run`, async () => {
    const alive: Child[] = [];
    try {
      const { accountId, importId } = await stageFaultImport(suite.bed, suite.csv);
      const first = await suite.bed.start('worker', { APP_NAME: 'worker-a' });
      alive.push(first);
      await enqueue(suite.bed, accountId, importId);
      await midPhase(suite.bed.sql, importId, phase);
      await expectResumedAfterKill(
        suite.bed,
        { accountId, importId, reference: suite.reference },
        { fault: 'worker kill -9 on the cluster, restarted worker', phase },
        () => suite.bed.kill(first),
        async () => alive.push(await suite.bed.start('worker', { APP_NAME: 'worker-b' })),
      );
    } finally {
      for (const c of alive) await suite.bed.kill(c);
    }
  }, 120_000);
}

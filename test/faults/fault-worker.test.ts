/**
 * Worker death (issue "Hardening", builds 5 and 9): a worker process SIGKILLed while it reads the
 * file or merges it leaves a job whose lock lapses; a restarted worker, or a second one that was
 * running all along, picks it up within 30 seconds (not after a 5-minute lock) and the import ends
 * `success` with the counts and contacts of an uninterrupted run of the same file.
 *
 * Each test prints one JSON line (fault, phase, recovery time) for the hardening notes.
 */
import { expect, test } from 'bun:test';
import type { Child } from '../helpers/fault-bed';
import {
  enqueue,
  expectResumedAfterKill,
  midPhase,
  referenceBed,
  runningOn,
  stageFaultImport,
} from '../helpers/fault-import';

const suite = referenceBed();
const alive: Child[] = [];
/** Worker children by APP_NAME, which PostgreSQL shows as the application_name of their sessions. */
const byAppName = new Map<string, Child>();

async function startWorker(name: string): Promise<Child> {
  const child = await suite.bed.start('worker', { APP_NAME: name });
  alive.push(child);
  byAppName.set(name, child);
  return child;
}

async function stopWorkers(): Promise<void> {
  for (const c of alive.splice(0)) await suite.bed.kill(c);
}

for (const phase of ['read', 'merge'] as const) {
  test(
    `a worker killed in ${phase} is resumed by a restarted worker within 30 s ` + 'and ends like an uninterrupted run',
    async () => {
      try {
        const { accountId, importId } = await stageFaultImport(suite.bed, suite.csv);
        const first = await startWorker('worker-a');
        await enqueue(suite.bed, accountId, importId);
        await midPhase(suite.bed.sql, importId, phase);
        await expectResumedAfterKill(
          suite.bed,
          { accountId, importId, reference: suite.reference },
          { fault: 'worker kill -9, restarted worker', phase },
          () => suite.bed.kill(first),
          () => startWorker('worker-b'),
        );
      } finally {
        await stopWorkers();
      }
    },
    90_000,
  );

  test(
    `a worker killed in ${phase} is resumed by a second live worker within 30 s ` +
      'and ends like an uninterrupted run',
    async () => {
      try {
        const { accountId, importId } = await stageFaultImport(suite.bed, suite.csv);
        await startWorker('worker-a');
        await startWorker('worker-b');
        await enqueue(suite.bed, accountId, importId);
        await midPhase(suite.bed.sql, importId, phase);
        const holder = await runningOn(suite.bed.sql, importId);
        const victim = byAppName.get(holder ?? '');
        expect(victim).toBeDefined();
        await expectResumedAfterKill(
          suite.bed,
          { accountId, importId, reference: suite.reference },
          { fault: 'worker kill -9, second live worker', phase },
          () => suite.bed.kill(victim!),
        );
      } finally {
        await stopWorkers();
      }
    },
    90_000,
  );
}

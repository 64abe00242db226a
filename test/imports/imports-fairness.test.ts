/**
 * Fair between accounts (issue 19): a small import never waits behind another account's large one.
 * A worker on its defaults (no WORKER_CONCURRENCY) runs a multi-batch import of account A; once A's
 * first batch has merged, account B's one-row import is enqueued. B must end `success` before A does,
 * and both exactly. Then: several accounts' imports interleave in one worker, it is killed -9 and a
 * new one started: every import ends exactly like an uninterrupted run.
 */
import { expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { LocalStore } from '../../src/storage/local';
import { UploadTokens } from '../../src/storage/upload-token';
import type { Child } from '../helpers/fault-bed';
import { contactsChecksum, waitForImportEnd } from '../helpers/fault-bed';
import { enqueue, midPhase, outcome, progress, referenceBed, stageFaultImport, until } from '../helpers/fault-import';
import { stageImport } from '../helpers/file-store';
import { createAccount, createAttribute } from '../helpers/fixtures';

const suite = referenceBed();
const alive: Child[] = [];

async function startWorker(name: string, env: Record<string, string> = {}): Promise<Child> {
  const child = await suite.bed.start('worker', { APP_NAME: name, ...env });
  alive.push(child);
  return child;
}

async function stopWorkers(): Promise<void> {
  for (const c of alive.splice(0)) await suite.bed.kill(c);
}

/** Account B: a fresh account and a one-row import of it, staged `uploaded` (not enqueued). */
async function stageOneRow(): Promise<{ accountId: string; importId: string }> {
  const accountId = await createAccount(suite.bed.sql);
  await createAttribute(suite.bed.sql, accountId, 'n', 'number');
  const store = new LocalStore(suite.bed.storeDir, 'http://localhost:0', new UploadTokens(randomBytes(32)));
  const importId = await stageImport(suite.bed.sql, store, accountId, 'Email,n\nsolo@example.com,7\n', {
    columns: ['Email', 'n'],
    strategy: 'overwrite',
  });
  return { accountId, importId };
}

async function completedAt(importId: string): Promise<Date> {
  const [row] = await suite.bed.sql<{ completed_at: Date }[]>`
    select completed_at from contact_imports where id = ${importId}`;
  return row!.completed_at;
}

test('on the defaults, a one-row import started after a large one has merged a batch ends first', async () => {
  try {
    const a = await stageFaultImport(suite.bed, suite.csv);
    await startWorker('fair-worker');
    await enqueue(suite.bed, a.accountId, a.importId);
    const atB = await midPhase(suite.bed.sql, a.importId, 'merge');
    // Uploaded only now, or the worker's sweep would enqueue it at start (see the turns test below).
    const b = await stageOneRow();
    await enqueue(suite.bed, b.accountId, b.importId);

    const bEnd = await waitForImportEnd(suite.bed.sql, b.accountId, b.importId, 60_000);
    expect(bEnd).toMatchObject({ status: 'success', rowCount: 1, addedCount: 1, malformedCount: 0 });
    const aWhenBEnded = await progress(suite.bed.sql, a.importId);
    const aOutcome = await outcome(suite.bed.sql, a.accountId, a.importId, 120_000);
    console.log(
      JSON.stringify({
        fairness: 'one-row import beside a 60-batch one',
        aCheckpointWhenBStarted: atB.checkpoint,
        aWhenBEnded: { status: aWhenBEnded.status, phase: aWhenBEnded.phase, checkpoint: aWhenBEnded.checkpoint },
      }),
    );
    expect((await completedAt(b.importId)).getTime()).toBeLessThan((await completedAt(a.importId)).getTime());
    expect(aWhenBEnded.status).toBe('importing');
    expect(aOutcome).toEqual(suite.reference);
    const [contact] = await suite.bed.sql`
      select email, attributes from contacts where account_id = ${b.accountId}`;
    expect(contact).toEqual({ email: 'solo@example.com', attributes: { n: 7 } });
    expect(await contactsChecksum(suite.bed.sql, b.accountId)).toMatchObject({ count: 1 });
  } finally {
    await stopWorkers();
  }
}, 240_000);

test('imports of three accounts interleaving in one worker, killed -9, all end exactly', async () => {
  try {
    const runs: { accountId: string; importId: string }[] = [];
    for (let k = 0; k < 3; k++) runs.push(await stageFaultImport(suite.bed, suite.csv));
    const first = await startWorker('fair-killed');
    for (const r of runs) await enqueue(suite.bed, r.accountId, r.importId);
    // Interleaving: at least two of them have work committed and none has ended.
    await until(
      'two imports under way at once',
      async () => {
        const now = await Promise.all(runs.map((r) => progress(suite.bed.sql, r.importId)));
        const busy = now.filter((p) => p.status === 'importing' && (p.staged > 0 || p.checkpoint > 0));
        return busy.length >= 2 && now.every((p) => p.status !== 'success');
      },
      120_000,
    );
    await suite.bed.kill(first);
    alive.splice(alive.indexOf(first), 1);
    await startWorker('fair-restarted');
    for (const r of runs)
      expect(await outcome(suite.bed.sql, r.accountId, r.importId, 180_000)).toEqual(suite.reference);
  } finally {
    await stopWorkers();
  }
}, 420_000);

test('beyond its places, a worker takes turns: the running import gives way at a merge batch and resumes', async () => {
  try {
    const a = await stageFaultImport(suite.bed, suite.csv);
    // One place, and tiny batches: A merges for well over its 5 s slice (about 12,500 batches, 10-15 s
    // here), so B can only run before A ends if A gives way.
    const worker = await startWorker('fair-one-place', { WORKER_CONCURRENCY: '1', IMPORT_BATCH_SIZE: '4' });
    await enqueue(suite.bed, a.accountId, a.importId);
    await midPhase(suite.bed.sql, a.importId, 'merge');
    // B is uploaded only now: the worker's sweep enqueues any uploaded import that has no job, and a
    // B staged before the worker started ran during A's read (A gave way before its dedupe instead).
    const b = await stageOneRow();
    await enqueue(suite.bed, b.accountId, b.importId);

    const bEnd = await waitForImportEnd(suite.bed.sql, b.accountId, b.importId, 60_000);
    expect(bEnd).toMatchObject({ status: 'success', rowCount: 1, addedCount: 1 });
    const aWhenBEnded = await progress(suite.bed.sql, a.importId);
    expect(aWhenBEnded).toMatchObject({ status: 'importing', phase: 'merge' });
    expect(await outcome(suite.bed.sql, a.accountId, a.importId, 180_000)).toEqual(suite.reference);
    const log = await Bun.file(worker.log).text();
    // Should the merge's line be missing again: what the worker said about turns and faults.
    if (!log.includes('import merge gives way'))
      console.error(
        log
          .split('\n')
          .filter((l) => /give|yield|error|warn|retry|interrupted/i.test(l))
          .join('\n'),
      );
    expect(log.includes('import gives its place to a waiting import')).toBe(true);
    expect(log.includes('import merge gives way')).toBe(true);
    console.log(JSON.stringify({ fairness: 'one place, turns', aCheckpointWhenBEnded: aWhenBEnded.checkpoint }));
  } finally {
    await stopWorkers();
  }
}, 240_000);

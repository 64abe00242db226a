/**
 * PostgreSQL faults during an import (issue "Hardening"): an immediate restart of the server in
 * read, dedupe or merge, or pg_terminate_backend of every connection of the worker. The worker
 * process must live through it (postgres.js used to throw "null is not an object (evaluating
 * 'socket.write')" as an uncaughtException, and the worker exits on those), and the import must end
 * `success` with the counts and contacts of an uninterrupted run of the same file.
 *
 * Each test prints one JSON line (fault, phase, recovery time, counts equal) for the hardening notes.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { faultBed, type Child, type FaultBed } from '../helpers/fault-bed';
import {
  dbNow,
  enqueue,
  faultCsv,
  movingAgain,
  outcome,
  stageFaultImport,
  until,
  type Outcome,
} from '../helpers/fault-import';
import {
  holdIn,
  jobAttempts,
  PG_FAULT_ENV,
  terminateWorkerBackends,
  WORKER_APP,
  type Phase,
} from '../helpers/pg-faults';

let bed: FaultBed;
let worker: Child;
let csv: string;
let reference: Outcome;
let referenceAttempts: Awaited<ReturnType<typeof jobAttempts>>;

beforeAll(async () => {
  bed = await faultBed(PG_FAULT_ENV);
  csv = faultCsv();
  worker = await bed.start('worker', { APP_NAME: WORKER_APP });
  const { accountId, importId } = await stageFaultImport(bed, csv);
  await enqueue(bed, accountId, importId);
  reference = await outcome(bed.sql, accountId, importId);
  expect(reference).toMatchObject({ status: 'success', failureReason: null, rowCount: 49_960 });
  referenceAttempts = await jobAttempts(bed, importId);
}, 120_000);

afterAll(async () => {
  await bed?.stop();
});

/** The one worker lives through every fault: no exit, no uncaught exception or rejection in its log. */
async function expectWorkerAlive(): Promise<void> {
  const log = await bed.tail(worker, 400);
  expect(log).not.toMatch(/uncaughtException|unhandledRejection/);
  expect(worker.proc.exitCode).toBeNull();
}

/** `work`, or a failure naming the worker's last words as soon as it exits. */
async function orWorkerExit<T>(work: Promise<T>): Promise<T> {
  const exited = worker.proc.exited.then(async (code) => {
    throw new Error(`the worker exited (${code}):\n${await bed.tail(worker, 15)}`);
  });
  return Promise.race([work, exited]);
}

async function faultIn(phase: Phase, fault: 'restart' | 'terminate'): Promise<void> {
  const { accountId, importId } = await stageFaultImport(bed, csv);
  await enqueue(bed, accountId, importId);
  const hold = await holdIn(bed, importId, accountId, phase);
  const faultAt = await dbNow(bed.sql);
  if (fault === 'restart') {
    await bed.restartPostgres(); // the hold dies with its session
  } else {
    expect(await terminateWorkerBackends(bed.sql)).toBeGreaterThan(0);
    await hold.release();
  }
  await until('the database to answer', () => bed.sql`select 1`.then(() => true));
  const recoveryMs = await orWorkerExit(movingAgain(bed.sql, importId, faultAt, 40_000));
  const got = await orWorkerExit(outcome(bed.sql, accountId, importId, 40_000));
  const countsEqual = JSON.stringify(got) === JSON.stringify(reference);
  const name =
    fault === 'restart' ? 'PostgreSQL restart -m immediate' : "pg_terminate_backend of the worker's connections";
  console.log(JSON.stringify({ fault: name, phase, recoveryMs, countsEqual }));
  expect(got).toEqual(reference);
  // The run that met the fault waited for the database and resumed itself: no retry of the job spent.
  expect(await jobAttempts(bed, importId)).toEqual(referenceAttempts);
  await expectWorkerAlive();
}

test(
  'an immediate PostgreSQL restart in merge: the worker lives, the import ends like an uninterrupted run',
  () => faultIn('merge', 'restart'),
  90_000,
);

test(
  'an immediate PostgreSQL restart in read: the worker lives, the import ends like an uninterrupted run',
  () => faultIn('read', 'restart'),
  90_000,
);

test(
  'an immediate PostgreSQL restart in dedupe: the worker lives, the import ends like an uninterrupted run',
  () => faultIn('dedupe', 'restart'),
  90_000,
);

test(
  'pg_terminate_backend of every worker connection in merge: ' +
    'the worker lives, the import ends like an uninterrupted run',
  () => faultIn('merge', 'terminate'),
  90_000,
);

test(
  'pg_terminate_backend of every worker connection in read (its COPY): ' +
    'the worker lives, the import ends like an uninterrupted run',
  () => faultIn('read', 'terminate'),
  90_000,
);

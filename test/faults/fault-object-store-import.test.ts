/**
 * The object store fails under an import (issue 58): a real worker process reads its file from
 * s3rver through the fault proxy. Whatever the store does mid-read (500s, SlowDown, resets,
 * stalls, bodies cut short or gone silent, an outage of seconds), the import ends with the counts
 * and contacts of the run without faults, and the worker never exits. Prints one JSON line per
 * outage with the time from the store's return to the import's end (docs/reliability.md).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { faultBed, type Child, type FaultBed } from '../helpers/fault-bed';
import { enqueue, faultAccount, faultCsv, outcome, until, type Outcome } from '../helpers/fault-import';
import { stageImport } from '../helpers/file-store';
import type { FaultPlan } from '../helpers/s3-fault-proxy';
import { s3FaultBed, type S3FaultBed } from '../helpers/s3-fault-bed';

let s3: S3FaultBed;
let bed: FaultBed;
let worker: Child;
let csv: string;
let reference: Outcome;

beforeAll(async () => {
  s3 = await s3FaultBed({ requestTimeoutMs: 1_000, maxAttempts: 4 });
  // One merge batch: the faults are the read's, and the file is done sooner.
  bed = await faultBed(s3.env);
  worker = await bed.start('worker', { APP_NAME: 's3-faults' });
  csv = faultCsv();
  reference = await run();
  expect(reference).toMatchObject({ status: 'success', failureReason: null });
}, 120_000);
afterAll(async () => {
  await bed?.stop();
  await s3?.stop();
});

/** A fresh account with the file staged on S3 (past the proxy) as an `uploaded` import. */
async function stage(): Promise<{ accountId: string; importId: string }> {
  const accountId = await faultAccount(bed.sql);
  const importId = await stageImport(bed.sql, s3.direct, accountId, csv, {
    columns: ['Email', 'n'],
    strategy: 'overwrite',
    restoreDisabled: true,
  });
  return { accountId, importId };
}

/** Stages the file, sets `plan` on the proxy, enqueues the import and waits for its end. */
async function run(plan?: FaultPlan): Promise<Outcome> {
  const { accountId, importId } = await stage();
  s3.proxy.set(plan);
  try {
    await enqueue(bed, accountId, importId);
    return await outcome(bed.sql, accountId, importId);
  } finally {
    s3.proxy.set(undefined);
  }
}

const gets = (r: { method: string }) => r.method === 'GET';

async function expectWorkerAlive(): Promise<void> {
  expect(worker.proc.exitCode).toBeNull();
  expect(worker.proc.killed).toBe(false);
}

describe('an import whose file the store serves badly', () => {
  const plans: [string, FaultPlan][] = [
    ['500 InternalError on three reads', { fault: 'error500', next: 3, match: gets }],
    ['503 SlowDown on three reads', { fault: 'slowDown', next: 3, match: gets }],
    ['connection resets on three reads', { fault: 'reset', next: 3, match: gets }],
    ['a stall past the request timeout on two reads', { fault: 'stall', next: 2, match: gets }],
    ['bodies cut short on three reads', { fault: 'truncate', next: 3, match: gets }],
    ['bodies gone silent half way on two reads', { fault: 'stallBody', next: 2, match: gets }],
    ['half of all reads cut short', { fault: 'truncate', rate: 0.5, match: gets }],
  ];
  for (const [what, plan] of plans) {
    test(`ends as the run without faults: ${what}`, async () => {
      const injected = s3.proxy.injected;
      expect(await run(plan)).toEqual(reference);
      expect(s3.proxy.injected).toBeGreaterThan(injected);
      await expectWorkerAlive();
    }, 60_000);
  }
});

describe('an import while the store is down', () => {
  test('waits, importing, and ends as the run without faults once the store is back', async () => {
    const { accountId, importId } = await stage();
    s3.proxy.set({ fault: 'slowDown', rate: 1 });
    await enqueue(bed, accountId, importId);
    // The job's first delivery fails after the SDK's attempts; BullMQ retries it 5 s later.
    await until('a read refused by the store', async () => s3.proxy.injected > 0 && (await Bun.sleep(6_000), true));
    const [row] = await bed.sql`select status from contact_imports where id = ${importId}`;
    expect(['uploaded', 'importing']).toContain(row!.status);
    s3.proxy.set(undefined);
    const back = performance.now();
    const got = await outcome(bed.sql, accountId, importId);
    const recoveryMs = Math.round(performance.now() - back);
    console.log(JSON.stringify({ fault: 'object store down 6 s at the read', recoveryMs }));
    expect(got).toEqual(reference);
    // The job's retries come 5 s, then 10 s apart: the import ends within one of those waits of the store's return.
    expect(recoveryMs).toBeLessThan(30_000);
    await expectWorkerAlive();
  }, 90_000);
});

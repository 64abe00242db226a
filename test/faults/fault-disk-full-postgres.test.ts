/**
 * PostgreSQL's disk fills up (issue 58, disk full): its data directory on a tmpfs of its own
 * (test/helpers/small-fs.ts), filled by a file the test writes and removes. An import that meets
 * the full disk in read, dedupe or merge waits (still `importing`) and, once space is freed, ends
 * with the counts and contacts of an uninterrupted run; single writes get 503 api_error
 * problem+json with Retry-After within 1 s; no process exits. Should the WAL be what cannot grow,
 * PostgreSQL PANICs and recovers like a crash, which the same checks cover.
 *
 * Each test prints one JSON line (fault, phase, recovery time, counts equal) for docs/reliability.md.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { chown, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { faultBed, type Child, type FaultBed } from '../helpers/fault-bed';
import { enqueue, faultCsv, outcome, progress, stageFaultImport, until, type Outcome } from '../helpers/fault-import';
import { holdIn, PG_FAULT_ENV, WORKER_APP, type Phase } from '../helpers/pg-faults';
import { createAccount, createKey } from '../helpers/fixtures';
import { fillDisk, moveOntoSmallFs, type SmallFs } from '../helpers/small-fs';

let bed: FaultBed;
let pgDir: string;
let disk: SmallFs;
let worker: Child;
let api: Child;
let csv: string;
let reference: Outcome;

beforeAll(async () => {
  bed = await faultBed(PG_FAULT_ENV);
  pgDir = join(bed.dataDir, 'postgres');
  await bed.stopPostgres();
  // Room for the cluster, the imports' WAL and staging; a filler takes the rest when a test fills it.
  disk = await moveOntoSmallFs(pgDir, 768 * 1024 ** 2);
  // The server's log outside the small disk: its PANIC and recovery lines must not be lost to the full disk.
  const outside = join(bed.dataDir, 'postgres.log');
  const { uid, gid } = await stat(pgDir);
  await writeFile(outside, '');
  await chown(outside, uid, gid);
  await rm(join(pgDir, 'log'), { force: true });
  await symlink(outside, join(pgDir, 'log'));
  await bed.startPostgres();
  await until('the database to answer', () => bed.sql`select 1`.then(() => true));
  csv = faultCsv();
  worker = await bed.start('worker', { APP_NAME: WORKER_APP });
  api = await bed.start('api', { APP_NAME: 'disk-full-api' });
  const { accountId, importId } = await stageFaultImport(bed, csv);
  await enqueue(bed, accountId, importId);
  reference = await outcome(bed.sql, accountId, importId);
  expect(reference).toMatchObject({ status: 'success', failureReason: null, rowCount: 49_960 });
}, 120_000);

afterAll(async () => {
  await bed?.stopPostgres().catch(() => {});
  await disk?.unmount();
  await bed?.stop();
});

/** Whether PostgreSQL PANICked since the log had `from` characters (a WAL write that did not fit). */
async function panickedSince(from: number): Promise<boolean> {
  const log = await Bun.file(join(pgDir, 'log'))
    .text()
    .catch(() => '');
  return /PANIC/.test(log.slice(from));
}

const logLength = async () =>
  (
    await Bun.file(join(pgDir, 'log'))
      .text()
      .catch(() => '')
  ).length;

/**
 * Fills the disk. A checkpoint first recycles the finished WAL segments into the next ones, so
 * it is a table's or an index's growth that fails (53100), not the WAL's (a PANIC).
 */
async function fill() {
  await bed.sql`checkpoint`;
  return fillDisk(pgDir, 0);
}

/** The worker and the API live through it: no exit, no uncaught exception or rejection. */
async function expectAlive(): Promise<void> {
  for (const child of [worker, api]) {
    expect(child.proc.exitCode).toBeNull();
    expect(await bed.tail(child, 2_000)).not.toMatch(/uncaughtException|unhandledRejection/);
  }
}

/** Where an import stands, as far as "it moved past the full disk" goes. */
const mark = async (importId: string) => {
  const p = await progress(bed.sql, importId);
  return { phase: p.phase, status: p.status, staged: p.staged, checkpoint: p.checkpoint };
};

async function diskFullIn(phase: Phase): Promise<void> {
  const { accountId, importId } = await stageFaultImport(bed, csv);
  await enqueue(bed, accountId, importId);
  const hold = await holdIn(bed, importId, accountId, phase);
  const logFrom = await logLength();
  const filled = await fill();
  await hold.release();

  // The import meets the full disk and waits: the worker says so, the import stays open.
  const waits = (line: string) => line.includes(importId) && line.includes('disk is full');
  await until('the worker to wait on the full disk', async () => (await bed.tail(worker, 200)).split('\n').some(waits));
  const stalled = await mark(importId);
  await Bun.sleep(1_500);
  expect((await mark(importId)).status).toBe('importing');

  const freedAt = Date.now();
  await filled.free();
  // Recovery: from freeing the space to the import past where the full disk stopped it.
  await until(
    'the import to move past the full disk',
    async () => {
      const now = await mark(importId);
      return (
        now.status !== 'importing' ||
        now.phase !== stalled.phase ||
        now.staged > stalled.staged ||
        now.checkpoint > stalled.checkpoint
      );
    },
    30_000,
  );
  const recoveryMs = Date.now() - freedAt;
  const got = await outcome(bed.sql, accountId, importId, 40_000);
  const panic = await panickedSince(logFrom);
  const countsEqual = JSON.stringify(got) === JSON.stringify(reference);
  console.log(JSON.stringify({ fault: 'PostgreSQL disk full', phase, recoveryMs, countsEqual, panic }));
  expect(got).toEqual(reference);
  await expectAlive();
}

test(
  'the disk fills in read: the import waits, and once space is freed ends like an uninterrupted run',
  () => diskFullIn('read'),
  60_000,
);

test(
  'the disk fills in dedupe: the import waits, and once space is freed ends like an uninterrupted run',
  () => diskFullIn('dedupe'),
  60_000,
);

test(
  'the disk fills in merge: the import waits, and once space is freed ends like an uninterrupted run',
  () => diskFullIn('merge'),
  60_000,
);

test('single writes on a full disk: 503 api_error with Retry-After within 1 s, 2xx once space is freed', async () => {
  const accountId = await createAccount(bed.sql);
  const key = await createKey(bed.sql, accountId);
  const create = async (email: string) => {
    const startedAt = Date.now();
    const res = await fetch(`${api.url}/v1/contacts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email }),
      signal: AbortSignal.timeout(10_000),
    });
    return { res, body: (await res.json()) as Record<string, unknown>, ms: Date.now() - startedAt };
  };
  expect((await create('before@example.com')).res.status).toBe(201);
  const logFrom = await logLength();
  const filled = await fill();
  // The pages the tables have free take a few rows; then every write needs the disk to grow.
  let refused: Awaited<ReturnType<typeof create>> | undefined;
  for (let i = 0; i < 5_000 && !refused; i++) {
    const r = await create(`full-${i}@example.com`);
    expect(r.ms).toBeLessThan(1_000);
    if (r.res.status === 503) refused = r;
    else expect(r.res.status).toBe(201);
  }
  expect(refused).toBeDefined();
  expect(refused!.res.headers.get('content-type')).toBe('application/problem+json');
  expect(Number(refused!.res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(refused!.body).toMatchObject({ status: 503, code: 'api_error', title: 'Service unavailable' });
  // While it stays full, a write is refused as fast (or lands, where an index page still has room).
  for (let i = 0; i < 20; i++) {
    const r = await create(`still-full-${i}@example.com`);
    expect([201, 503]).toContain(r.res.status);
    expect(r.ms).toBeLessThan(1_000);
  }

  const freedAt = Date.now();
  await filled.free();
  const first = await until('a 2xx again', async () => {
    const r = await create(`freed-${Date.now()}@example.com`);
    return r.res.status === 201 ? r : undefined;
  });
  const recoveryMs = Date.now() - freedAt - first.ms;
  const panic = await panickedSince(logFrom);
  console.log(JSON.stringify({ fault: 'PostgreSQL disk full', phase: 'API single writes', recoveryMs, panic }));
  await expectAlive();
}, 60_000);

test('the WAL cannot grow: PostgreSQL PANICs; 503 within 1 s while it is down, then the import resumes', async () => {
  const { accountId, importId } = await stageFaultImport(bed, csv);
  await enqueue(bed, accountId, importId);
  const hold = await holdIn(bed, importId, accountId, 'merge');
  const probeAccount = await createAccount(bed.sql);
  const key = await createKey(bed.sql, probeAccount);
  const logFrom = await logLength();
  // No checkpoint first: the WAL has its current segment and no more, so it is the WAL that cannot grow.
  const filled = await fillDisk(pgDir, 0);
  // A writer's WAL past the segment's end: the new segment does not fit, and PostgreSQL PANICs.
  const wal = await bed.sql`
    select count(pg_logical_emit_message(false, 'disk-full', repeat('x', 1000000))) from generate_series(1, 64)`.then(
    () => 'written',
    (e: { code?: string }) => e.code,
  );
  await hold.release();
  expect(wal).not.toBe('written');
  expect(await panickedSince(logFrom)).toBe(true);

  // Crash recovery cannot write its end-of-recovery checkpoint on the full disk either: the server
  // stops, as PostgreSQL does after a failed recovery. The API answers 503 within 1 s meanwhile.
  const down = await until('PostgreSQL to stop after its failed recovery', async () => {
    const log = (await Bun.file(join(pgDir, 'log')).text()).slice(logFrom);
    return /database system is shut down|database system is ready to accept connections/.exec(log)?.[0];
  });
  for (let i = 0; i < 5; i++) {
    const startedAt = Date.now();
    const res = await fetch(`${api.url}/v1/contacts/${'0'.repeat(32)}`, {
      headers: { authorization: `Bearer ${key}` },
      signal: AbortSignal.timeout(10_000),
    });
    const ms = Date.now() - startedAt;
    if (down.includes('ready')) break; // recovery fitted after all: nothing is down
    expect(res.status).toBe(503);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(ms).toBeLessThan(1_000);
  }

  const freedAt = Date.now();
  await filled.free();
  // Started again as its service manager would (systemd restarts a server that stopped).
  if (down.includes('shut down')) await bed.startPostgres();
  const startedMs = Date.now() - freedAt;
  const ok = await until('a 2xx again', async () => {
    const res = await fetch(`${api.url}/v1/contacts/${'0'.repeat(32)}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    return res.status === 404 ? Date.now() : undefined;
  });
  const got = await outcome(bed.sql, accountId, importId, 60_000);
  const countsEqual = JSON.stringify(got) === JSON.stringify(reference);
  console.log(
    JSON.stringify({
      fault: 'PostgreSQL WAL disk full (PANIC)',
      phase: 'merge',
      serverStopped: down.includes('shut down'),
      freedToStartedMs: startedMs,
      apiRecoveryMs: ok - freedAt,
      countsEqual,
    }),
  );
  expect(got).toEqual(reference);
  await expectAlive();
}, 90_000);

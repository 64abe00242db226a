/**
 * The local object store's disk fills up (issue 58, disk full): its directory on a tmpfs of its
 * own (test/helpers/small-fs.ts), filled by a file the test writes and removes. The upload link
 * answers S3-style XML 507 InsufficientStorage and keeps nothing; an import whose rejected-rows
 * report does not fit waits, and once space is freed ends like an uninterrupted run, report and
 * all; an export that does not fit is run again with the cause in the worker's log and serves no
 * file until a whole one is written. No temp file is left behind; no process exits.
 *
 * Each test prints one JSON line (fault, phase, recovery time) for docs/reliability.md.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { rejectedRowsObjectKey } from '../../src/storage';
import { LocalStore } from '../../src/storage/local';
import { UploadTokens } from '../../src/storage/upload-token';
import { faultBed, type Child, type FaultBed } from '../helpers/fault-bed';
import { enqueue, faultCsv, outcome, progress, stageFaultImport, until, type Outcome } from '../helpers/fault-import';
import { createAccount, createAttribute, createKey } from '../helpers/fixtures';
import { holdIn, PG_FAULT_ENV, WORKER_APP } from '../helpers/pg-faults';
import { fillDisk, freeBytes, moveOntoSmallFs, type SmallFs } from '../helpers/small-fs';

let bed: FaultBed;
let disk: SmallFs;
let store: LocalStore;
let worker: Child;
let api: Child;
let csv: string;
let reference: Outcome;
let referenceReport: string;

beforeAll(async () => {
  bed = await faultBed(PG_FAULT_ENV);
  disk = await moveOntoSmallFs(bed.storeDir, 64 * 1024 ** 2);
  store = new LocalStore(bed.storeDir, 'http://localhost:0', new UploadTokens(randomBytes(32)));
  csv = faultCsv();
  worker = await bed.start('worker', { APP_NAME: WORKER_APP });
  api = await bed.start('api', { APP_NAME: 'disk-full-api' });
  const { accountId, importId } = await stageFaultImport(bed, csv);
  await enqueue(bed, accountId, importId);
  reference = await outcome(bed.sql, accountId, importId);
  expect(reference).toMatchObject({ status: 'success', failureReason: null, malformedCount: 61 });
  referenceReport = await reportOf(accountId, importId);
}, 120_000);

afterAll(async () => {
  // Lazily: the API and the worker may still hold a file there; the bed then removes an empty directory.
  await disk?.unmount();
  await bed?.stop();
});

async function reportOf(accountId: string, importId: string): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of await store.read(rejectedRowsObjectKey(accountId, importId))) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Every file under the store whose name says it is a write in progress. */
async function tempFiles(): Promise<string[]> {
  const names = await readdir(bed.storeDir, { recursive: true });
  return names.filter((n) => /(^|\/)\.tmp-/.test(n));
}

/** What the store holds of an export's run (its object, its versions, its temp files). */
async function filesOf(accountId: string, exportId: string, run: number): Promise<string[]> {
  const dir = join(bed.storeDir, 'contact-exports', accountId, exportId);
  const names = await readdir(dir, { recursive: true }).catch(() => [] as string[]);
  return names.filter((n) => n.startsWith(`${run}.csv`));
}

async function expectAlive(): Promise<void> {
  for (const child of [worker, api]) {
    expect(child.proc.exitCode).toBeNull();
    expect(await bed.tail(child, 2_000)).not.toMatch(/uncaughtException|unhandledRejection/);
  }
}

async function call(key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

test('an upload into a full store: XML 507 with Retry-After, nothing kept; the link works once freed', async () => {
  const accountId = await createAccount(bed.sql);
  await createAttribute(bed.sql, accountId, 'n', 'number');
  const key = await createKey(bed.sql, accountId);
  const created = await call(key, 'POST', '/v1/contact-imports', {
    columns: ['Email', 'n'],
    duplicateContactStrategy: 'overwrite',
  });
  expect(created.status).toBe(201);
  const { id: importId, uploadUrl } = created.body as { id: string; uploadUrl: string };

  // 256 KiB left, a 1.3 MB file: the body is cut off by the disk, part-way through.
  const filled = await fillDisk(bed.storeDir, 256 * 1024);
  const refused = await fetch(uploadUrl, { method: 'PUT', body: csv, signal: AbortSignal.timeout(10_000) });
  expect(refused.status).toBe(507);
  expect(refused.headers.get('content-type')).toBe('application/xml');
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(await refused.text()).toContain('<Code>InsufficientStorage</Code>');
  expect(await tempFiles()).toEqual([]);
  expect(await freeBytes(bed.storeDir)).toBeGreaterThanOrEqual(200 * 1024);
  expect((await call(key, 'GET', `/v1/contact-imports/${importId}`)).body.status).toBe('awaiting-upload');

  const freedAt = Date.now();
  await filled.free();
  const accepted = await fetch(uploadUrl, { method: 'PUT', body: csv, signal: AbortSignal.timeout(10_000) });
  const recoveryMs = Date.now() - freedAt;
  expect(accepted.status).toBe(200);
  console.log(JSON.stringify({ fault: 'object store disk full', phase: 'upload', recoveryMs }));
  const end = await outcome(bed.sql, accountId, importId);
  expect(end).toMatchObject({ status: 'success', rowCount: 49_960, malformedCount: 61 });
  await expectAlive();
}, 60_000);

test('the rejected-rows report into a full store: the import waits, then ends like an uninterrupted run', async () => {
  const { accountId, importId } = await stageFaultImport(bed, csv);
  await enqueue(bed, accountId, importId);
  const hold = await holdIn(bed, importId, accountId, 'merge');
  const filled = await fillDisk(bed.storeDir, 0);
  await hold.release();

  const waits = (line: string) => line.includes(importId) && line.includes('disk is full');
  await until('the worker to wait on the full disk', async () => (await bed.tail(worker, 200)).split('\n').some(waits));
  await Bun.sleep(1_000);
  expect((await progress(bed.sql, importId)).status).toBe('importing');
  expect(await tempFiles()).toEqual([]);

  const freedAt = Date.now();
  await filled.free();
  const got = await outcome(bed.sql, accountId, importId, 40_000);
  const recoveryMs = Date.now() - freedAt;
  const countsEqual = JSON.stringify(got) === JSON.stringify(reference);
  console.log(
    JSON.stringify({ fault: 'object store disk full', phase: 'rejected-rows report', recoveryMs, countsEqual }),
  );
  expect(got).toEqual(reference);
  expect(await reportOf(accountId, importId)).toBe(referenceReport);
  expect(await tempFiles()).toEqual([]);
  await expectAlive();
}, 60_000);

test('an export into a full store runs again, serves no file until a whole one is written', async () => {
  const { accountId, importId } = await stageFaultImport(bed, csv);
  await enqueue(bed, accountId, importId);
  await outcome(bed.sql, accountId, importId);
  const key = await createKey(bed.sql, accountId);

  const filled = await fillDisk(bed.storeDir, 64 * 1024);
  const created = await call(key, 'POST', '/v1/contact-exports', {});
  expect(created.status).toBe(202);
  const exportId = created.body.id as string;
  const runs = async () => {
    const [row] = await bed.sql<{ attempts: number; status: string }[]>`
      select attempts, status from contact_exports where account_id = ${accountId} and id = ${exportId}`;
    return row!;
  };
  // Each run meets the full disk and is taken up again, the cause in the worker's log.
  await until('a third run', async () => (await runs()).attempts >= 3, 30_000);
  const log = await bed.tail(worker, 400);
  expect(log).toMatch(/contact export run failed.*disk of the object store[^"]* is full \(ENOSPC\)/);
  const meanwhile = await call(key, 'GET', `/v1/contact-exports/${exportId}`);
  expect(meanwhile.body.status).not.toBe('success');
  expect(meanwhile.body.downloadUrl).toBeUndefined();
  // The first run ended: nothing of its file is left, temp or not (the third may be writing its own).
  expect(await filesOf(accountId, exportId, 1)).toEqual([]);

  const freedAt = Date.now();
  await filled.free();
  const done = await until(
    'the export to end',
    async () => {
      const e = await call(key, 'GET', `/v1/contact-exports/${exportId}`);
      return e.body.status === 'success' || e.body.status === 'failed' ? e.body : undefined;
    },
    40_000,
  );
  const recoveryMs = Date.now() - freedAt;
  console.log(
    JSON.stringify({ fault: 'object store disk full', phase: 'export', recoveryMs, runs: (await runs()).attempts }),
  );
  expect(done.status).toBe('success');
  const file = await (await fetch(String(done.downloadUrl))).text();
  const lines = file.trimEnd().split('\n');
  expect(lines[0]).toStartWith('Email');
  expect(lines.length - 1).toBe(reference.contacts.count);
  expect(await tempFiles()).toEqual([]);
  expect(await filesOf(accountId, exportId, 1)).toEqual([]);
  await expectAlive();
}, 60_000);

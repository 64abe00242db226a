/**
 * The object store fails (issue 58), for everything but the import's read: the upload sweep's
 * HeadObject, the export's multipart upload, the presigned download of an export, and the
 * rejected-rows report streamed by the API, against s3rver behind the fault proxy. Each ends
 * exactly (the same bytes, the arrival recorded once) or fails clearly, after bounded retries.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { loadConfig } from '../../src/config';
import { DownloadLinks } from '../../src/exports/download';
import { createImportQueue, type BullImportQueue } from '../../src/imports/bullmq-queue';
import { rejectedRowsResponse } from '../../src/imports/rejected-rows';
import { importObjectKey } from '../../src/storage';
import { runNextExport } from '../../worker/exports/loop';
import { writeObject } from '../../worker/exports/sink';
import { sweep } from '../../worker/sweep';
import { testApp, type TestApp } from '../helpers/app';
import { createAccount } from '../helpers/fixtures';
import type { S3Fault, S3Request } from '../helpers/s3-fault-proxy';
import { s3FaultBed, type S3FaultBed } from '../helpers/s3-fault-bed';

const TIMEOUT_MS = 1_500;
const ATTEMPTS = 4;
const md5 = (b: Uint8Array) => createHash('md5').update(b).digest('hex');

let bed: S3FaultBed;
let t: TestApp;
let queue: BullImportQueue;
let dir: string;
beforeAll(async () => {
  bed = await s3FaultBed({ requestTimeoutMs: TIMEOUT_MS, maxAttempts: ATTEMPTS });
  dir = await mkdtemp(join(tmpdir(), 's3-faults-files-'));
  t = await testApp({ storage: bed.store }, { ...bed.env, DATA_DIR: dir });
  queue = createImportQueue(t.db.redisUrl, { prefix: `test-s3-faults-${crypto.randomUUID().slice(0, 8)}` });
});
afterAll(async () => {
  await queue?.queue.obliterate({ force: true });
  await queue?.close();
  await t?.close();
  await bed?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function readAll(body: AsyncIterable<unknown> | Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(Buffer.from(c as Uint8Array));
  return Buffer.concat(chunks);
}

async function putDirect(key: string, data: Uint8Array): Promise<void> {
  const file = join(dir, `put-${crypto.randomUUID()}`);
  await writeFile(file, data);
  await bed.direct.putFile(key, file);
  await rm(file);
}

describe('the upload sweep', () => {
  async function awaitingUpload(): Promise<{ accountId: string; id: string }> {
    const accountId = await createAccount(t.db.sql);
    const [row] = await t.db.sql<{ id: string }[]>`
      insert into contact_imports (account_id, status, method, columns, duplicate_contact_strategy, updated_count,
                                   skipped_count)
      values (${accountId}, 'awaiting-upload', 'api', '{Email}', 'skip', 0, 0)
      returning id`;
    await putDirect(importObjectKey(accountId, row!.id), Buffer.from('Email\na@example.com\n'));
    return { accountId, id: row!.id };
  }
  const run = () => sweep({ sql: t.db.sql, storage: bed.store, queue, eventRetentionDays: 7 });
  const heads = (r: S3Request) => r.method === 'HEAD';

  for (const fault of ['error500', 'slowDown', 'reset', 'stall'] as S3Fault[]) {
    test(`records an arrival once when its HeadObject meets ${fault} twice`, async () => {
      const { id } = await awaitingUpload();
      bed.proxy.set({ fault, next: 2, match: heads });
      const result = await run();
      bed.proxy.set(undefined);
      expect(result.arrived).toEqual([id]);
      const [row] = await t.db.sql`select status, object_size from contact_imports where id = ${id}`;
      expect(row).toMatchObject({ status: 'uploaded', object_size: 20 });
      expect((await run()).arrived).toEqual([]);
    }, 30_000);
  }

  test('carries on past a store that stays down, and the next sweep takes the arrival', async () => {
    const { id } = await awaitingUpload();
    bed.proxy.set({ fault: 'slowDown', rate: 1, match: heads });
    const from = bed.proxy.requests.length;
    const down = await run();
    bed.proxy.set(undefined);
    expect(down.arrived).toEqual([]);
    // Bounded: the SDK's S3_MAX_ATTEMPTS tries, then the sweep's next pass.
    expect(bed.proxy.requests.slice(from).filter((r) => r.fault).length).toBe(ATTEMPTS);
    const [row] = await t.db.sql`select status from contact_imports where id = ${id}`;
    expect(row!.status).toBe('awaiting-upload');
    expect((await run()).arrived).toEqual([id]);
  }, 30_000);
});

describe("the export's multipart upload", () => {
  // Three parts of PART_BYTES (16 MiB) and a short last one.
  const data = randomBytes(2 * 16 * 1024 * 1024 + 123_457);
  async function* body() {
    for (let at = 0; at < data.length; at += 1 << 20) yield data.subarray(at, Math.min(at + (1 << 20), data.length));
  }
  const upload = (key: string) => writeObject(bed.store, key, body(), 'text/csv', async () => {});
  const parts = (r: S3Request) => r.method === 'PUT' && r.target.includes('uploadId=');
  const completes = (r: S3Request) => r.method === 'POST' && r.target.includes('uploadId=');

  const cases: [string, S3Fault, (r: S3Request) => boolean][] = [
    ['UploadPart', 'error500', parts],
    ['UploadPart', 'slowDown', parts],
    ['UploadPart', 'reset', parts],
    ['UploadPart', 'stall', parts],
    ['CompleteMultipartUpload', 'slowDown', completes],
    // The store completed the upload, but its answer was cut: asked again, it no longer knows the upload.
    ['CompleteMultipartUpload', 'truncate', completes],
    ['CreateMultipartUpload', 'reset', (r) => r.method === 'POST' && r.target.includes('uploads')],
  ];
  for (const [what, fault, match] of cases) {
    test(`writes the whole file when two ${what} requests meet ${fault}`, async () => {
      const key = `export-${what}-${fault}.csv`;
      bed.proxy.set({ fault, next: 2, match });
      const size = await upload(key);
      bed.proxy.set(undefined);
      expect(size).toBe(data.length);
      const stored = await readAll(await bed.direct.read(key));
      expect(stored.length).toBe(data.length);
      expect(md5(stored)).toBe(md5(data));
    }, 45_000);
  }

  test('fails after bounded retries when the store stays down, and leaves no object', async () => {
    const key = 'export-down.csv';
    bed.proxy.set({ fault: 'error500', rate: 1, match: parts });
    const started = performance.now();
    const error = await upload(key).catch((e: unknown) => e);
    const ms = performance.now() - started;
    bed.proxy.set(undefined);
    expect((error as Error).name).toBe('InternalError');
    expect(await bed.direct.head(key)).toBeUndefined();
    expect(ms).toBeLessThan(20_000);
  }, 45_000);
});

describe('an export while the store is down', () => {
  test('is run again every 5 s, past its attempts, and ends with every row once the store is back', async () => {
    await t.db.sql`
      insert into contacts (account_id, email_md5, email, attributes, brand_ids, enabled, first_source)
      select ${t.accountId}, md5('x' || k || '@example.com')::uuid, 'x' || k || '@example.com', '{}', '{}', true, 'api'
      from generate_series(1, 5000) k`;
    const created = await t.call('POST', '/v1/contact-exports', { body: {} });
    expect(created.status).toBe(202);
    bed.proxy.set({ fault: 'error500', rate: 1 });
    // Past MAX_ATTEMPTS (3) runs: a store away is waited out, as the database away is, not counted against the export.
    for (let failed = 0; failed < 3;) {
      const end = await runNextExport(t.db.sql, bed.store, crypto.randomUUID(), 7);
      if (end) expect(end).toBe('retry');
      if (end) failed++;
      else await Bun.sleep(100);
    }
    const [row] = await t.db.sql`select status, attempts from contact_exports where id = ${created.body.id}`;
    expect(row).toMatchObject({ status: 'exporting', attempts: 3 });
    bed.proxy.set(undefined);
    const back = performance.now();
    let end;
    while (!end) {
      end = await runNextExport(t.db.sql, bed.store, crypto.randomUUID(), 7);
      if (!end) await Bun.sleep(100);
    }
    const recoveryMs = Math.round(performance.now() - back);
    console.log(JSON.stringify({ fault: 'object store down at the export', recoveryMs }));
    expect(end).toBe('success');
    const e = (await t.call('GET', `/v1/contact-exports/${created.body.id}`)).body;
    expect(e).toMatchObject({ status: 'success', rowCount: 5000 });
    const file = await (await fetch(e.downloadUrl)).text();
    expect(file.trim().split('\n').length).toBe(5001);
    expect(recoveryMs).toBeLessThan(10_000);
  }, 45_000);
});

describe('the presigned download of an export', () => {
  const data = randomBytes(1_000_000);
  const key = 'contact-exports/download.csv';
  let url: string;
  beforeAll(async () => {
    await putDirect(key, data);
    const config = loadConfig({ ...bed.env, DATA_DIR: dir });
    const grant = { accountId: crypto.randomUUID(), exportId: crypto.randomUUID(), expiresAt: Date.now() / 1000 + 600 };
    url = (await new DownloadLinks(config, bed.store).link(grant, key, false))!;
    expect(url.startsWith(bed.proxy.url)).toBe(true);
  });

  test('answers with the whole file and its Content-Length', async () => {
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBe(String(data.length));
    expect(md5(Buffer.from(await res.arrayBuffer()))).toBe(md5(data));
  });

  test('a body cut short fails the client, which can ask for the rest by Range', async () => {
    bed.proxy.set({ fault: 'truncate', next: 1 });
    const res = await fetch(url);
    bed.proxy.set(undefined);
    expect(res.headers.get('content-length')).toBe(String(data.length));
    const got: Buffer[] = [];
    const error = await (async () => {
      for await (const c of res.body!) got.push(Buffer.from(c));
    })().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    const have = Buffer.concat(got).length;
    expect(have).toBeLessThan(data.length);
    const rest = await fetch(url, { headers: { range: `bytes=${have}-` } });
    expect(rest.status).toBe(206);
    expect(md5(Buffer.concat([...got, Buffer.from(await rest.arrayBuffer())]))).toBe(md5(data));
  });

  test('a throttled store answers 503 SlowDown, an answer a client retries', async () => {
    bed.proxy.set({ fault: 'slowDown', next: 1 });
    const res = await fetch(url);
    bed.proxy.set(undefined);
    expect(res.status).toBe(503);
    expect(await res.text()).toContain('<Code>SlowDown</Code>');
  });
});

describe('the rejected-rows report streamed by the API', () => {
  const report = Buffer.from(
    ['row,reason', ...Array.from({ length: 40_000 }, (_, i) => `${i + 2},invalid_email`)].join('\n'),
  );
  let accountId: string;
  let importId: string;
  beforeAll(async () => {
    accountId = t.accountId;
    const key = `contact-imports/${accountId}/report.rejected-rows.csv`;
    await putDirect(key, report);
    const [row] = await t.db.sql<{ id: string }[]>`
      insert into contact_imports (account_id, status, method, columns, duplicate_contact_strategy, updated_count,
                                   skipped_count, rejected_rows_key, rejected_rows_expires_at, completed_at)
      values (${accountId}, 'success', 'api', '{Email}', 'skip', 0, 0, ${key}, now() + interval '1 day', now())
      returning id`;
    importId = row!.id;
  });
  const respond = () => rejectedRowsResponse(t.db.sql, bed.store, accountId, importId);

  for (const fault of ['truncate', 'stallBody', 'reset', 'slowDown'] as S3Fault[]) {
    test(`is sent whole when two of its reads meet ${fault}`, async () => {
      bed.proxy.set({ fault, next: 2, match: (r) => r.method === 'GET' });
      const res = await respond();
      const got = Buffer.from(await res.arrayBuffer());
      bed.proxy.set(undefined);
      expect(md5(got)).toBe(md5(report));
    }, 30_000);
  }

  test('is a 503 problem with Retry-After when the store stays away', async () => {
    bed.proxy.set({ fault: 'slowDown', rate: 1, match: (r) => r.method === 'GET' });
    const res = await t.call('GET', `/v1/contact-imports/${importId}/rejected-rows`);
    bed.proxy.set(undefined);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(res.body).toMatchObject({ status: 503, title: 'Service unavailable' });
  }, 30_000);

  test('errors its body, never ends it short, when the store goes down mid-report', async () => {
    bed.proxy.set({ fault: 'truncate', next: 1, match: (r) => r.method === 'GET' });
    const res = await respond();
    bed.proxy.set({ fault: 'error500', rate: 1, match: (r) => r.method === 'GET' });
    const error = await res.arrayBuffer().catch((e: unknown) => e);
    bed.proxy.set(undefined);
    expect(String(error)).toContain(`of ${report.length}`);
  }, 60_000);
});

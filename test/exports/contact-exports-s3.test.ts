/**
 * Contact exports on the s3 driver (issue 37), against an S3-protocol server (s3rver) as
 * test/storage/storage-s3.test.ts starts it: the worker's multipart upload, the presigned GET a client
 * downloads through (its file name, no checksum parameters: DESIGN.md's trap), a takeover that
 * aborts the previous run's multipart upload, and the retention sweep removing the object.
 *
 * s3rver 3.7.1 has no AbortMultipartUpload (a DELETE with ?uploadId is 405): the test's observer
 * on the store's client answers it as S3 does, by dropping s3rver's directory of that upload, and
 * records every command the worker sent.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import Papa from 'papaparse';
// @ts-expect-error s3rver ships no type declarations
import S3rver from 's3rver';
import { loadConfig } from '../../src/config';
import { setLogLevel } from '../../src/log';
import { createStore, S3Store } from '../../src/storage';
import { removeExpiredExports } from '../../worker/exports/expire';
import { runNextExport } from '../../worker/exports/loop';
import { testApp, type TestApp } from '../helpers/app';
import { createAccount, createAttribute, createBrand, createKey } from '../helpers/fixtures';

const BUCKET = 'imports';
/** Contacts inserted with SQL beside the API's few: a file over one 16 MiB part (worker/exports/sink.ts). */
const BULK = 110_000;
let dir: string;
let server: S3rver;
let store: S3Store;
let t: TestApp;
let account: { accountId: string; key: string };
let brand: string;
const token = crypto.randomUUID();

/** Every S3 command the store's client sent: its name, key, upload id and part number. */
const sent: { name: string; key?: string; uploadId?: string; part?: number }[] = [];
/** While set, a first run's second UploadPart waits for it: a run stuck as a dead worker's would be. */
let stall: Promise<void> | undefined;
/** Off: an AbortMultipartUpload goes to s3rver, which refuses it (405), as a store without the operation would. */
let emulateAbort = true;

beforeAll(async () => {
  setLogLevel('warn');
  dir = await mkdtemp(join(tmpdir(), 'exports-s3-'));
  server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: join(dir, 's3'),
    configureBuckets: [{ name: BUCKET, configs: [] }],
  });
  const { port } = (await server.run()) as unknown as { port: number };
  const config = loadConfig({
    DATA_DIR: dir,
    S3_BUCKET: BUCKET,
    S3_ENDPOINT: `http://127.0.0.1:${port}`,
    S3_ACCESS_KEY_ID: 'S3RVER',
    S3_SECRET_ACCESS_KEY: 'S3RVER',
  });
  store = (await createStore(config)) as S3Store;
  store.client.middlewareStack.add(
    (next, context) => async (args) => {
      const name = String(context.commandName);
      const input = args.input as { Key?: string; UploadId?: string; PartNumber?: number };
      sent.push({ name, key: input.Key, uploadId: input.UploadId, part: input.PartNumber });
      if (name === 'AbortMultipartUploadCommand' && emulateAbort) {
        await abortOnS3rver(input.UploadId!);
        return { output: { $metadata: { httpStatusCode: 204 } }, response: {} } as never;
      }
      if (name === 'UploadPartCommand' && input.PartNumber === 2 && input.Key?.endsWith('/1.csv') && stall) await stall;
      return next(args);
    },
    { step: 'initialize', name: 'exportsS3Observer' },
  );
  t = await testApp({ storage: store } as never);
  const accountId = await createAccount(t.db.sql, 'exports-s3');
  account = { accountId, key: await createKey(t.db.sql, accountId) };
  for (const [name, type] of [
    ['text', 'string'],
    ['n', 'number'],
    ['flag', 'boolean'],
    ['tags', 'array'],
  ] as const)
    await createAttribute(t.db.sql, accountId, name, type);
  brand = await createBrand(t.db.sql, accountId, 'A');
  const tricky = [
    {
      email: 'q@example.com',
      attributes: { text: 'comma, "quote"\nnewline', n: -1.5, flag: true, tags: ['a;b', 'c'] },
    },
    { email: 'u@example.com', attributes: { text: 'üñí €', n: 42, flag: false }, brandIds: [brand] },
    { email: 'bare@example.com' },
  ];
  for (const body of tricky)
    expect((await t.call('POST', '/v1/contacts', { key: account.key, body })).status).toBe(201);
  // ~190 bytes a row, as an import would have stored them.
  await t.db.sql`
    insert into contacts (account_id, email_md5, email, attributes, first_source)
    select ${accountId}, md5('bulk' || i || '@example.com')::uuid, 'bulk' || i || '@example.com',
      jsonb_build_object(
        'text', repeat('x', 120) || i, 'n', i, 'flag', i % 2 = 0, 'tags', jsonb_build_array('t' || i % 7)),
      'import'
    from generate_series(1, ${BULK}) i`;
}, 60_000);

afterAll(async () => {
  await t?.close();
  store?.client.destroy();
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

/** What AbortMultipartUpload does on S3: the upload and its parts gone (NoSuchUpload when there is none). */
async function abortOnS3rver(uploadId: string): Promise<void> {
  const path = await findDir(join(dir, 's3'), uploadId);
  if (!path) throw Object.assign(new Error('The specified upload does not exist.'), { name: 'NoSuchUpload' });
  await rm(path, { recursive: true });
}

async function findDir(root: string, name: string): Promise<string | undefined> {
  for (const e of await readdir(root, { withFileTypes: true })) {
    if (!e.isDirectory()) continue;
    const path = join(root, e.name);
    if (e.name === name) return path;
    const found = await findDir(path, name);
    if (found) return found;
  }
  return undefined;
}

const work = (as = token) => runNextExport(t.db.sql, store, as, 7);
const rowOf = async (id: string) =>
  (
    await t.db.sql<{ status: string; attempts: number; object_key: string | null; upload_id: string | null }[]>`
      select status, attempts, object_key, upload_id from contact_exports
      where account_id = ${account.accountId} and id = ${id}`
  )[0]!;

const parse = (text: string) =>
  Papa.parse<string[]>(text.replace(/\n$/, ''), { delimiter: ',', header: false }).data as string[][];

/** The file through the presigned link, as any HTTP client downloads it; checks what S3 answers with it. */
async function download(url: string, id: string, gzip: boolean): Promise<string> {
  const u = new URL(url);
  expect(u.searchParams.get('X-Amz-Signature')).toBeString();
  expect(u.searchParams.get('response-content-disposition')).toBe(
    `attachment; filename="contact-export-${id}.csv${gzip ? '.gz' : ''}"`,
  );
  expect(url).not.toContain('x-amz-checksum');
  expect(url).not.toContain('x-amz-sdk-checksum');
  const res = await fetch(url);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-disposition')).toBe(
    `attachment; filename="contact-export-${id}.csv${gzip ? '.gz' : ''}"`,
  );
  expect(res.headers.get('content-type')).toBe(gzip ? 'application/gzip' : 'text/csv; charset=utf-8');
  const bytes = Buffer.from(await res.arrayBuffer());
  return (gzip ? gunzipSync(bytes) : bytes).toString('utf8');
}

/** The file holds every contact of the account once, the API's few exactly as stored. */
function checkFile(text: string): void {
  const rows = parse(text);
  expect(rows[0]).toEqual(['Email', 'Brand', 'text', 'n', 'flag', 'tags']);
  expect(rows.length - 1).toBe(BULK + 3);
  const byEmail = new Map(rows.slice(1).map((r) => [r[0], r]));
  expect(byEmail.size).toBe(BULK + 3);
  expect(byEmail.get('q@example.com')).toEqual([
    'q@example.com',
    '',
    'comma, "quote"\nnewline',
    '-1.5',
    'true',
    'a\\;b;c',
  ]);
  expect(byEmail.get('u@example.com')).toEqual(['u@example.com', brand, 'üñí €', '42', 'false', '']);
  expect(byEmail.get('bare@example.com')).toEqual(['bare@example.com', '', '', '', '', '']);
  expect(byEmail.get(`bulk${BULK}@example.com`)).toEqual([
    `bulk${BULK}@example.com`,
    '',
    `${'x'.repeat(120)}${BULK}`,
    String(BULK),
    'true',
    `t${BULK % 7}`,
  ]);
}

describe('contact exports on S3', () => {
  for (const compression of ['none', 'gzip'] as const)
    test(`compression ${compression}: a multipart upload, downloaded through the presigned link`, async () => {
      sent.length = 0;
      const created = await t.call('POST', '/v1/contact-exports', { key: account.key, body: { compression } });
      expect(created.status).toBe(202);
      expect(await work()).toBe('success');
      const e = (await t.call('GET', `/v1/contact-exports/${created.body.id}`, { key: account.key })).body;
      expect(e).toMatchObject({ status: 'success', rowCount: BULK + 3, compression });
      const row = await rowOf(e.id);
      expect(row).toMatchObject({ attempts: 1, upload_id: null });
      expect(row.object_key).toBe(
        `contact-exports/${account.accountId}/${e.id}/1.csv${compression === 'gzip' ? '.gz' : ''}`,
      );
      const parts = sent.filter((s) => s.name === 'UploadPartCommand' && s.key === row.object_key);
      // 110,000 rows of ~190 bytes: two 16 MiB parts plain; gzip'd, one.
      expect(parts.map((p) => p.part)).toEqual(compression === 'none' ? [1, 2] : [1]);
      expect(sent.filter((s) => s.name === 'AbortMultipartUploadCommand')).toEqual([]);
      checkFile(await download(e.downloadUrl, e.id, compression === 'gzip'));
    }, 60_000);

  for (const refused of [false, true])
    test(
      refused
        ? 'a takeover whose abort the store refuses still ends with one whole file of its own'
        : "a takeover aborts the previous run's multipart upload and writes one whole file of its own",
      () => takeover(refused),
      60_000,
    );

  async function takeover(refused: boolean) {
    sent.length = 0;
    emulateAbort = !refused;
    const created = await t.call('POST', '/v1/contact-exports', { key: account.key, body: {} });
    const id: string = created.body.id;
    // The first run sends its first part, then hangs before the second, as a worker that died there.
    let release!: () => void;
    stall = new Promise<void>((r) => (release = r));
    const first = work(crypto.randomUUID());
    const stalled = async () => {
      for (let i = 0; i < 600; i++) {
        if (sent.some((s) => s.name === 'UploadPartCommand' && s.part === 2)) return;
        await Bun.sleep(50);
      }
      throw new Error('the first run never reached its second part');
    };
    await stalled();
    const before = await rowOf(id);
    expect(before).toMatchObject({ status: 'exporting', attempts: 1 });
    expect(before.upload_id).toBeString();
    expect(await findDir(join(dir, 's3'), before.upload_id!)).toBeString();

    // Its lease lapses (the stuck run's timer may renew it meanwhile: lapse it again until claimed).
    let second: Awaited<ReturnType<typeof work>>;
    do {
      await t.db.sql`
        update contact_exports set lease_until = now() - interval '1 second'
        where account_id = ${account.accountId} and id = ${id}`;
      second = await work();
    } while (second === undefined);
    expect(second).toBe('success');
    const aborts = sent.filter((s) => s.name === 'AbortMultipartUploadCommand');
    expect(aborts).toContainEqual({
      name: 'AbortMultipartUploadCommand',
      key: before.object_key!,
      uploadId: before.upload_id!,
    });
    if (!refused) expect(await findDir(join(dir, 's3'), before.upload_id!)).toBeUndefined();

    // The stuck run goes on, finds its upload gone or its lease taken, and changes nothing but its own file.
    stall = undefined;
    release();
    expect(await first).toBe('lost');
    const after = await rowOf(id);
    expect(after).toMatchObject({ status: 'success', attempts: 2, upload_id: null });
    expect(after.object_key).toBe(`contact-exports/${account.accountId}/${id}/2.csv`);
    expect(await store.head(before.object_key!)).toBeUndefined();
    const e = (await t.call('GET', `/v1/contact-exports/${id}`, { key: account.key })).body;
    expect(e.rowCount).toBe(BULK + 3);
    checkFile(await download(e.downloadUrl, id, false));
    emulateAbort = true;
  }

  test('the retention sweep removes the object; the export then has no link, and the old link is dead', async () => {
    const created = await t.call('POST', '/v1/contact-exports', { key: account.key, body: { compression: 'gzip' } });
    expect(await work()).toBe('success');
    const id: string = created.body.id;
    const e = (await t.call('GET', `/v1/contact-exports/${id}`, { key: account.key })).body;
    const { object_key: key } = await rowOf(id);
    expect(await store.head(key!)).toBeDefined();
    await t.db.sql`
      update contact_exports set file_expires_at = now() - interval '1 second'
      where account_id = ${account.accountId} and id = ${id}`;
    expect(await removeExpiredExports(t.db.sql, store)).toContain(id);
    expect(await store.head(key!)).toBeUndefined();
    const after = (await t.call('GET', `/v1/contact-exports/${id}`, { key: account.key })).body;
    expect(after.status).toBe('success');
    expect(after.downloadUrl).toBeUndefined();
    expect((await fetch(e.downloadUrl)).status).toBe(404);
  }, 60_000);
});

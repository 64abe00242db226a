// gzip uploads, an extension beyond the contract: a file PUT gzip-compressed (with Content-Encoding:
// gzip or recognised by its magic bytes 1f 8b) is stored as sent, counts against the upload limit
// compressed, and is gunzipped by the worker while it reads (worker/import/decompress.ts). Through
// the real flow: POST /v1/contact-imports, PUT to uploadUrl, the job run with runImport.
import { beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
// @ts-expect-error s3rver ships no type declarations
import S3rver from 's3rver';
import { loadConfig } from '../../src/config';
import { createStore, importObjectKey, LocalStore, S3Store } from '../../src/storage';
import { uploadHandler } from '../../src/uploads';
import { runImport, UnrecoverableImportError } from '../../worker/import';
import { decompressed } from '../../worker/import/decompress';
import { ImportFileError } from '../../worker/import/errors';
import type { TestApp } from '../helpers/app';
import { uploadBed } from '../helpers/upload-bed';
import { testConfig } from '../helpers/file-store';
import { runAdmin } from '../helpers/admin-cli';
import { createAccount, createAttribute, createKey } from '../helpers/fixtures';

const COLUMNS = ['Email', 'firstName', 'age', 'vip', 'tags'];
const md5 = (b: string | Uint8Array) => createHash('md5').update(b).digest('hex');

const bed = uploadBed('imports-gzip');
let t: TestApp;
let dir: string;
let store: LocalStore;
let put: (req: Request) => Promise<Response>;
beforeAll(() => {
  ({ t, dir, store, put } = bed);
});

/**
 * `rows` data rows with every kind the pipeline tells apart: typed values, quoted commas and line
 * breaks, a repeated email (upper-cased), malformed rows (no @, a non-number), CRLF line ends.
 */
function csv(rows: number, salt = ''): Buffer {
  const lines = ['Email,firstName,age,vip,tags'];
  for (let i = 0; i < rows; i++) {
    if (i % 97 === 5) lines.push(`broken${i}${salt}.example.com,X,1,yes,a`);
    else if (i % 89 === 7) lines.push(`n${i}${salt}@example.com,X,not-a-number,no,`);
    else if (i % 50 === 3 && i > 10) lines.push(`U${i - 10}${salt}@EXAMPLE.COM,Again ${i},${i},true,z`);
    else lines.push(`u${i}${salt}@example.com,"Name, ${i}\r\nline",${i % 90},${i % 2 ? 'yes' : '0'},a;b${i % 7}`);
  }
  return Buffer.from(`${lines.join('\r\n')}\r\n`);
}

/** A fresh account (so each import's contacts stand alone) with the columns' attributes and a key. */
async function account(): Promise<{ id: string; key: string }> {
  const id = await createAccount(t.db.sql);
  await createAttribute(t.db.sql, id, 'firstName', 'string');
  await createAttribute(t.db.sql, id, 'age', 'number');
  await createAttribute(t.db.sql, id, 'vip', 'boolean');
  await createAttribute(t.db.sql, id, 'tags', 'array');
  return { id, key: await createKey(t.db.sql, id) };
}

async function newImport(a: { key: string }): Promise<{ id: string; url: string }> {
  const res = await t.call('POST', '/v1/contact-imports', {
    key: a.key,
    body: { columns: COLUMNS, duplicateContactStrategy: 'overwrite' },
  });
  expect(res.status).toBe(201);
  return { id: res.body.id, url: res.body.uploadUrl };
}

const PUT = (url: string, body: RequestInit['body'], headers: Record<string, string> = {}, via = put) =>
  via(new Request(url, { method: 'PUT', body, headers }));

/** Runs the import's job to its end; a job that fails for good is the import's `failed` state, not an error here. */
async function run(accountId: string, id: string, storage: LocalStore | S3Store = store) {
  await runImport({ sql: t.db.sql, storage, config: testConfig(1000, dir) }, accountId, id).catch((e) => {
    if (!(e instanceof UnrecoverableImportError)) throw e;
  });
}

/** The import as the API shows it, without the fields that differ between two imports of one file. */
async function view(a: { key: string }, id: string) {
  const res = await t.call('GET', `/v1/contact-imports/${id}`, { key: a.key });
  expect(res.status).toBe(200);
  const { id: _id, createdAt: _c, completedAt, uploadExpiresAt: _u, rejectedRowsUrl, ...rest } = res.body;
  return { ...rest, completed: typeof completedAt === 'string', report: typeof rejectedRowsUrl === 'string' };
}

async function contacts(accountId: string) {
  return [
    ...(await t.db.sql`
      select email, attributes, enabled from contacts where account_id = ${accountId} order by email`),
  ];
}

async function contactCount(accountId: string): Promise<number> {
  const [r] = await t.db.sql<{ n: number }[]>`select count(*)::int as n from contacts where account_id = ${accountId}`;
  return r!.n;
}

/** Imports `body` through the API and the upload link; returns the import's view and the account's contacts. */
async function importThroughLink(
  body: Uint8Array | ReadableStream<Uint8Array>,
  headers: Record<string, string> = {},
  bytes = body as Uint8Array,
) {
  const a = await account();
  const { id, url } = await newImport(a);
  const res = await PUT(url, body, headers);
  expect(res.status).toBe(200);
  expect(res.headers.get('etag')).toBe(`"${md5(bytes)}"`); // stored as sent
  await run(a.id, id);
  return { a, id, view: await view(a, id), contacts: await contacts(a.id) };
}

/** What importing the plain file gives, the reference every gzip import must equal. */
let plainFile: Buffer;
let plain: Awaited<ReturnType<typeof importThroughLink>>;
beforeAll(async () => {
  plainFile = csv(3000);
  plain = await importThroughLink(plainFile);
  expect(plain.view).toMatchObject({ status: 'success', completed: true });
  // The file has every kind of row: the comparisons below cover more than additions.
  expect(plain.view.malformedCount).toBeGreaterThan(0);
  expect(plain.view.duplicateInFileCount).toBeGreaterThan(0);
  expect(plain.contacts.length).toBe(plain.view.addedCount);
  expect(plain.contacts.length).toBeGreaterThan(2500);
});

/** The bytes of `b` with `n` bytes from the middle inverted. */
function flipped(b: Uint8Array, n = 16): Buffer {
  const out = Buffer.from(b);
  for (let i = 0; i < n; i++) out[(out.length >> 1) + i]! ^= 0xff;
  return out;
}

async function expectXml(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/xml');
  expect(await res.text()).toContain(`<Error><Code>${code}</Code><Message>`);
}

async function importStatus(id: string) {
  const [r] = await t.db.sql`select status, object_key, object_size from contact_imports where id = ${id}`;
  return r!;
}

/**
 * The staged rows and merge tables of an import still there (a report of rejected rows may be kept
 * apart), and on a Citus cluster the set of the staging pool it still holds (worker/import/staging-pool.ts).
 */
async function stagingTables(id: string): Promise<number> {
  const hex = id.replaceAll('-', '');
  const [r] = await t.db.sql<{ n: number }[]>`
    select (select count(*) from pg_class
            where relname = ${`import_rows_${hex}`} or relname like ${`import_merge_${hex}%`})::int
         + (select count(*) from staging_sets where import_id = ${id}::uuid)::int as n`;
  return r!.n;
}

describe('a gzip file imports exactly like the plain file', () => {
  test('with Content-Encoding: gzip', async () => {
    const gz = gzipSync(plainFile);
    const got = await importThroughLink(gz, { 'content-encoding': 'gzip' });
    expect(got.view).toEqual(plain.view);
    expect(got.contacts).toEqual(plain.contacts);
    // Stored compressed, as uploaded: the size is the compressed one.
    expect((await importStatus(got.id)).object_size).toBe(gz.length);
  });

  test('without the header, recognised by its magic bytes', async () => {
    const got = await importThroughLink(gzipSync(plainFile, { level: 9 }));
    expect(got.view).toEqual(plain.view);
    expect(got.contacts).toEqual(plain.contacts);
  });

  test('a multi-member gzip (concatenated .gz files, cut inside rows and characters)', async () => {
    const cuts = [0, 1001, 1002, 50_000, plainFile.length];
    const members = cuts.slice(1).map((end, k) => gzipSync(plainFile.subarray(cuts[k], end)));
    const got = await importThroughLink(Buffer.concat(members), { 'content-encoding': 'gzip' });
    expect(got.view).toEqual(plain.view);
    expect(got.contacts).toEqual(plain.contacts);
  });

  test('streamed in small chunks with the magic bytes split across them', async () => {
    const gz = gzipSync(plainFile);
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(gz.subarray(0, 1));
        for (let o = 1; o < gz.length; o += 777) c.enqueue(gz.subarray(o, o + 777));
        c.close();
      },
    });
    const got = await importThroughLink(body, { 'content-encoding': 'gzip' }, gz);
    expect(got.view).toEqual(plain.view);
    expect(got.contacts).toEqual(plain.contacts);
  });
});

describe('a broken gzip file fails the import with a clear reason and writes no contact', () => {
  // 30,000 rows in COPY batches of 1,000: the break is found after rows were staged, mid-read.
  const big = csv(30_000, 'b');

  async function expectFailed(body: Uint8Array, reason: string | RegExp) {
    const a = await account();
    const { id, url } = await newImport(a);
    expect((await PUT(url, body, { 'content-encoding': 'gzip' })).status).toBe(200);
    await run(a.id, id);
    const v = await view(a, id);
    expect(v.status).toBe('failed');
    if (typeof reason === 'string') expect(v.failureReason).toBe(reason);
    else expect(v.failureReason).toMatch(reason);
    expect(await contactCount(a.id)).toBe(0);
    expect(await stagingTables(id)).toBe(0);
    const [held] = await t.db.sql<{ n: number }[]>`
      select count(*)::int as n from bulk_operations where account_id = ${a.id}`;
    expect(held!.n).toBe(0);
  }

  test('corrupt: bytes flipped in the middle', async () => {
    await expectFailed(flipped(gzipSync(big)), /^The file is not valid gzip data \([a-z ]+\): it is corrupt\.$/);
  });

  test('corrupt: one bit of the checksum in the trailer', async () => {
    const gz = gzipSync(big);
    gz[gz.length - 6]! ^= 0x01;
    await expectFailed(gz, 'The file is not valid gzip data (incorrect data check): it is corrupt.');
  });

  test('truncated in the middle, or just before the end', async () => {
    const gz = gzipSync(big);
    await expectFailed(gz.subarray(0, gz.length >> 1), 'The gzip stream ends early: the file is truncated.');
    await expectFailed(gz.subarray(0, gz.length - 4), 'The gzip stream ends early: the file is truncated.');
  });

  test('junk after the last member', async () => {
    const junk = Buffer.concat([gzipSync(big), Buffer.from('Email\nlate@example.com\n')]);
    await expectFailed(junk, /^The file is not valid gzip data \(.+\): it is corrupt\.$/);
  });

  test('compressed twice', async () => {
    await expectFailed(
      gzipSync(gzipSync(big)),
      'The file is gzip-compressed twice: after decompressing it is gzip data again. Compress it once.',
    );
  });

  test('a header that does not match the columns fails as it would in a plain file', async () => {
    await expectFailed(gzipSync('Email,lastName\nx@example.com,X\n'), /^Header column 2 is "lastName"/);
  });
});

describe('the upload limit counts the bytes uploaded (compressed)', () => {
  const LIMIT = 30_000;

  test('a gzip body over the limit is refused with EntityTooLarge, with or without a Content-Length', async () => {
    const limited = uploadHandler(t.deps, { maxBytes: LIMIT });
    // Random emails compress poorly: the compressed body alone is over the limit.
    const noisy = Buffer.from(
      `Email\n${Array.from({ length: 3000 }, () => `${crypto.randomUUID()}@example.com`).join('\n')}\n`,
    );
    const gz = gzipSync(noisy);
    expect(gz.length).toBeGreaterThan(LIMIT);
    const a = await account();
    const { id, url } = await newImport(a);
    await expectXml(await PUT(url, gz, { 'content-encoding': 'gzip' }, limited), 400, 'EntityTooLarge');
    const streamed = new ReadableStream<Uint8Array>({
      start(c) {
        for (let o = 0; o < gz.length; o += 4096) c.enqueue(gz.subarray(o, o + 4096));
        c.close();
      },
    });
    await expectXml(await PUT(url, streamed, { 'content-encoding': 'gzip' }, limited), 400, 'EntityTooLarge');
    expect(await importStatus(id)).toMatchObject({ status: 'awaiting-upload', object_key: expect.any(String) });
    expect(await store.head(importObjectKey(a.id, id))).toBeUndefined();
  });

  test('a gzip body under the limit that decompresses to far more imports in full', async () => {
    const limited = uploadHandler(t.deps, { maxBytes: LIMIT });
    const gz = gzipSync(plainFile, { level: 9 });
    expect(gz.length).toBeLessThan(LIMIT);
    expect(plainFile.length).toBeGreaterThan(4 * LIMIT);
    // The plain file itself is refused by the same link.
    const a = await account();
    const { id, url } = await newImport(a);
    await expectXml(await PUT(url, plainFile, {}, limited), 400, 'EntityTooLarge');
    expect((await PUT(url, gz, { 'content-encoding': 'gzip' }, limited)).status).toBe(200);
    await run(a.id, id);
    expect(await view(a, id)).toEqual(plain.view);
    expect(await contacts(a.id)).toEqual(plain.contacts);
  });
});

describe('Content-Encoding the link cannot honour is refused before anything is stored', () => {
  test('Content-Encoding: gzip with a plain body: 400 InvalidRequest, then the right file is taken', async () => {
    const a = await account();
    const { id, url } = await newImport(a);
    for (const body of [plainFile, Buffer.from([0x1f]), new Uint8Array(0)])
      await expectXml(await PUT(url, body, { 'content-encoding': 'gzip' }), 400, 'InvalidRequest');
    expect((await importStatus(id)).status).toBe('awaiting-upload');
    expect(await store.head(importObjectKey(a.id, id))).toBeUndefined();
    const versions = await readdir(join(dir, 'objects', `${importObjectKey(a.id, id)}.v`)).catch(() => []);
    expect(versions).toEqual([]); // no temp file left behind
    expect((await PUT(url, gzipSync(plainFile), { 'content-encoding': 'GZIP' })).status).toBe(200);
    await run(a.id, id);
    expect(await view(a, id)).toEqual(plain.view);
  });

  test('another coding (br, deflate, gzip twice) is 400 InvalidArgument; identity is the plain file', async () => {
    const a = await account();
    const { id, url } = await newImport(a);
    for (const coding of ['br', 'deflate', 'gzip, gzip', 'zstd'])
      await expectXml(await PUT(url, plainFile, { 'content-encoding': coding }), 400, 'InvalidArgument');
    expect((await importStatus(id)).status).toBe('awaiting-upload');
    expect((await PUT(url, plainFile, { 'content-encoding': 'identity' })).status).toBe(200);
    await run(a.id, id);
    expect(await view(a, id)).toEqual(plain.view);
  });
});

describe('decompressed()', () => {
  const collect = async (source: AsyncIterable<Uint8Array>, max?: number) => {
    const parts: Uint8Array[] = [];
    for await (const c of decompressed(source, max)) parts.push(c);
    return Buffer.concat(parts);
  };
  async function* chunks(b: Uint8Array, size: number) {
    for (let o = 0; o < b.length; o += size) yield b.subarray(o, o + size);
  }

  test('a plain source passes through untouched, chunk for chunk', async () => {
    const parts = [Buffer.from('E'), Buffer.from('mail\na@'), Buffer.from('example.com\n')];
    const out: Uint8Array[] = [];
    for await (const c of decompressed(chunks(Buffer.concat(parts), 3))) out.push(c);
    expect(Buffer.concat(out).toString()).toBe('Email\na@example.com\n');
    expect(out.length).toBe(Math.ceil(Buffer.concat(parts).length / 3));
    expect((await collect(chunks(new Uint8Array(0), 1))).length).toBe(0);
    expect([...(await collect(chunks(Buffer.from([0x1f]), 1)))]).toEqual([0x1f]);
  });

  test('a decompression bomb fails once it expands past the cap, with memory flat', async () => {
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024)); // 64 MB of zeros in ~65 KB
    expect(bomb.length).toBeLessThan(100_000);
    const cap = 8 * 1024 * 1024;
    const err = await collect(chunks(bomb, 16_384), cap).catch((e) => e);
    expect(err).toBeInstanceOf(ImportFileError);
    expect(err.message).toBe(
      `The gzip file expands to more than ${cap} bytes. Split it and import the parts one after another.`,
    );
    // Without the cap the whole expansion streams through in bounded chunks.
    let n = 0;
    let largest = 0;
    for await (const c of decompressed(chunks(bomb, 16_384))) {
      n += c.byteLength;
      largest = Math.max(largest, c.byteLength);
    }
    expect(n).toBe(64 * 1024 * 1024);
    expect(largest).toBeLessThanOrEqual(256 * 1024);
  });

  test('an error of the source passes through as it is (a retry, not a broken file)', async () => {
    const gz = gzipSync(plainFile);
    async function* failing() {
      yield gz.subarray(0, 1000);
      throw new Error('connection reset');
    }
    const err = await collect(failing()).catch((e) => e);
    expect(err).not.toBeInstanceOf(ImportFileError);
    expect(err.message).toBe('connection reset');
  });

  test('stopping early closes the source stream, gzip or not', async () => {
    for (const body of [gzipSync(plainFile), plainFile]) {
      const source = Readable.from(chunks(body, 1024));
      for await (const _ of decompressed(source)) break;
      await Bun.sleep(10);
      expect(source.destroyed).toBe(true);
    }
  });
});

describe('the s3 driver', () => {
  test('a presigned PUT with Content-Encoding: gzip is stored compressed and imports like the plain file', async () => {
    const s3dir = join(dir, 's3');
    const server = new S3rver({
      address: '127.0.0.1',
      port: 0,
      silent: true,
      directory: s3dir,
      configureBuckets: [{ name: 'imports', configs: [] }],
    });
    const { port } = (await server.run()) as unknown as { port: number };
    const s3 = (await createStore(
      loadConfig({
        DATA_DIR: dir,
        S3_BUCKET: 'imports',
        S3_ENDPOINT: `http://127.0.0.1:${port}`,
        S3_ACCESS_KEY_ID: 'S3RVER',
        S3_SECRET_ACCESS_KEY: 'S3RVER',
      }),
    )) as S3Store;
    try {
      const a = await account();
      const id = crypto.randomUUID();
      const key = importObjectKey(a.id, id);
      const url = await s3.presignUpload({ key, accountId: a.id, importId: id, expiresAt: new Date(Date.now() + 6e5) });
      const gz = gzipSync(plainFile);
      const res = await fetch(url, { method: 'PUT', body: gz, headers: { 'content-encoding': 'gzip' } });
      expect(res.status).toBe(200);
      // S3 serves it back with Content-Encoding: gzip; the store reads the stored bytes, still compressed.
      const head: Buffer[] = [];
      for await (const c of await s3.read(key)) head.push(Buffer.from(c));
      expect(md5(Buffer.concat(head))).toBe(md5(gz));
      await t.db.sql`
        insert into contact_imports (account_id, id, status, method, columns, duplicate_contact_strategy,
          updated_count, skipped_count, object_key, object_size, uploaded_at)
        values (${a.id}, ${id}, 'uploaded', 'api', ${t.db.sql.array(COLUMNS)}, 'overwrite', 0, 0, ${key},
          ${gz.length}, now())`;
      await run(a.id, id, s3);
      expect(await view(a, id)).toEqual(plain.view);
      expect(await contacts(a.id)).toEqual(plain.contacts);
    } finally {
      s3.client.destroy();
      await server.close();
    }
  });
});

describe('admin CLI: import --file list.csv.gz', () => {
  const cli = (...args: string[]) => runAdmin(t.db.url, args, { DATA_DIR: join(dir, 'cli') });

  test('imports the gzip file exactly like the plain one (header read through gunzip)', async () => {
    const path = join(dir, 'list.csv.gz');
    await writeFile(path, gzipSync(plainFile));
    const a = await account();
    const r = await cli('import', '--account', a.id, '--file', path, '--strategy', 'overwrite');
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: '' });
    const { id } = JSON.parse(r.out);
    const v = await view(a, id);
    expect(v).toEqual({ ...plain.view, method: 'manual' });
    expect(await contacts(a.id)).toEqual(plain.contacts);
  });

  test('a gzip file broken in its first MB is refused before any import is made; --help mentions gzip', async () => {
    const path = join(dir, 'broken.csv.gz');
    await writeFile(path, gzipSync(plainFile).subarray(0, 2000));
    const a = await account();
    const r = await cli('import', '--account', a.id, '--file', path, '--strategy', 'overwrite');
    expect({ code: r.code, out: r.out }).toEqual({ code: 1, out: '' });
    expect(r.err.trim()).toBe(`admin: --file ${path}: The gzip stream ends early: the file is truncated.`);
    const [n] = await t.db.sql<{ n: number }[]>`
      select count(*)::int as n from contact_imports where account_id = ${a.id}`;
    expect(n!.n).toBe(0);
    const help = await cli('--help');
    expect(help.err).toContain('--file PATH.csv|PATH.csv.gz');
    expect(help.err).toContain('gzip-compressed');
  });
});

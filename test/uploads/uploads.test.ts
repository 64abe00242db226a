// The local store's upload link, PUT /uploads/<token> (spec: Uploading the file; DESIGN: object store,
// local driver). It must behave like an S3 presigned PUT and hand the import to the queue at once.
import { beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { importObjectKey, LocalStore } from '../../src/storage';
import { loadUploadSecret, UploadTokens } from '../../src/storage/upload-token';
import { uploadHandler } from '../../src/uploads';
import { runImport } from '../../worker/import';
import type { TestApp } from '../helpers/app';
import { uploadBed } from '../helpers/upload-bed';

const CSV = 'Email\na@example.com\nb@example.com\n';
const md5 = (s: string | Uint8Array) => createHash('md5').update(s).digest('hex');
const bed = uploadBed('uploads');
let t: TestApp;
let dir: string;
let store: LocalStore;
let put: (req: Request) => Promise<Response>;
let enqueued: string[];
beforeAll(() => {
  ({ t, dir, store, put, enqueued } = bed);
});
beforeEach(async () => {
  await t.db.sql`delete from contact_imports`;
  enqueued.length = 0;
});

/** A fresh import of the test account and its upload link. */
async function newImport(): Promise<{ id: string; url: string }> {
  const res = await t.call('POST', '/v1/contact-imports', {
    body: { columns: ['Email'], duplicateContactStrategy: 'overwrite' },
  });
  expect(res.status).toBe(201);
  return { id: res.body.id, url: res.body.uploadUrl };
}

const PUT = (url: string, body: RequestInit['body'], headers: Record<string, string> = {}) =>
  put(new Request(url, { method: 'PUT', body, headers }));

async function row(id: string) {
  const [r] = await t.db
    .sql`select status, object_key, object_etag, object_size, uploaded_at from contact_imports where id = ${id}`;
  return r!;
}

async function expectXml(res: Response, status: number, code: string, message?: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/xml');
  const text = await res.text();
  expect(text).toContain(`<Error><Code>${code}</Code><Message>`);
  if (message) expect(text).toContain(`<Message>${message}</Message>`);
}

async function readAll(id: string, etag?: string): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of await store.read(importObjectKey(t.accountId, id), etag)) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function leftovers(id: string): Promise<string[]> {
  return (
    await readdir(join(dir, 'objects', `${importObjectKey(t.accountId, id)}.v`)).catch(() => [] as string[])
  ).filter((n) => n.startsWith('.tmp-'));
}

describe('PUT /uploads/<token>: a valid upload', () => {
  test('200 with the quoted md5 ETag; the file is stored, the import uploaded and enqueued', async () => {
    const { id, url } = await newImport();
    const res = await PUT(url, CSV);
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe(`"${md5(CSV)}"`);
    const r = await row(id);
    expect(r.status).toBe('uploaded');
    expect(r.object_key).toBe(importObjectKey(t.accountId, id));
    expect(r.object_etag).toBeNull(); // pinned by the worker when it starts
    expect(r.object_size).toBe(CSV.length);
    expect(r.uploaded_at).toBeInstanceOf(Date);
    expect(enqueued).toEqual([id]);
    expect(await readAll(id, `"${md5(CSV)}"`)).toBe(CSV);
    expect(await store.head(r.object_key)).toMatchObject({ size: CSV.length, etag: `"${md5(CSV)}"` });
    expect(await leftovers(id)).toEqual([]);
    expect((await t.call('GET', `/v1/contact-imports/${id}`)).body.status).toBe('uploaded');
  });

  test('a streamed body without Content-Length is written in full', async () => {
    const { id, url } = await newImport();
    const chunk = new Uint8Array(256 * 1024).fill(65);
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 40; i++) c.enqueue(chunk);
        c.close();
      },
    });
    const res = await PUT(url, body);
    expect(res.status).toBe(200);
    expect((await row(id)).object_size).toBe(40 * chunk.length);
    const whole = new Uint8Array(40 * chunk.length).fill(65);
    expect(res.headers.get('etag')).toBe(`"${md5(whole)}"`);
  });

  test('a second PUT before the import starts replaces the file and its ETag (the last one is imported)', async () => {
    const { id, url } = await newImport();
    await PUT(url, CSV);
    const second = 'Email\nc@example.com\n';
    expect((await PUT(url, second)).status).toBe(200);
    const r = await row(id);
    expect(r.status).toBe('uploaded');
    expect(r.object_size).toBe(second.length);
    expect((await store.head(r.object_key))?.etag).toBe(`"${md5(second)}"`);
    expect(await readAll(id)).toBe(second);
    // The superseded version is gone: a reader pinned to it is told the object changed.
    await expect(readAll(id, `"${md5(CSV)}"`)).rejects.toThrow();
  });

  test('an upload that starts before the link expires completes after it (spec: however slow)', async () => {
    const { id } = await newImport();
    const token = store.tokens.sign({
      accountId: t.accountId,
      importId: id,
      expiresAt: Math.floor(Date.now() / 1000) + 1,
    });
    const body = new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(new TextEncoder().encode('Email\n'));
        await Bun.sleep(2_100);
        c.enqueue(new TextEncoder().encode('slow@example.com\n'));
        c.close();
      },
    });
    expect((await PUT(`http://api.test/uploads/${token}`, body)).status).toBe(200);
    expect(await readAll(id)).toBe('Email\nslow@example.com\n');
  });

  test('over real HTTP: a chunked upload through Bun.serve', async () => {
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: put });
    try {
      const { id, url } = await newImport();
      const path = new URL(url).pathname;
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          for (let i = 0; i < 64; i++) c.enqueue(new Uint8Array(64 * 1024).fill(67));
          c.close();
        },
      });
      const res = await fetch(`http://127.0.0.1:${server.port}${path}`, { method: 'PUT', body });
      expect(res.status).toBe(200);
      expect((await row(id)).object_size).toBe(64 * 64 * 1024);
      const bad = await fetch(`http://127.0.0.1:${server.port}/uploads/forged.token`, { method: 'PUT', body: CSV });
      expect(bad.status).toBe(403);
      expect(await bad.text()).toContain('<Code>AccessDenied</Code>');
    } finally {
      server.stop(true);
    }
  });

  test('the upload needs no Authorization header and ignores one', async () => {
    const { url } = await newImport();
    expect((await PUT(url, CSV, { authorization: 'Bearer nonsense' })).status).toBe(200);
  });
});

describe('PUT /uploads/<token>: refusals', () => {
  test('a PUT after the import started is 403 AccessDenied and changes nothing', async () => {
    const { id, url } = await newImport();
    await PUT(url, CSV);
    await t.db.sql`update contact_imports set status = 'importing', started_at = now() where id = ${id}`;
    enqueued.length = 0;
    await expectXml(await PUT(url, 'Email\nlate@example.com\n'), 403, 'AccessDenied');
    expect((await store.head(importObjectKey(t.accountId, id)))?.etag).toBe(`"${md5(CSV)}"`);
    expect(await readAll(id)).toBe(CSV);
    expect(enqueued).toEqual([]);
  });

  for (const status of ['failed', 'success'] as const) {
    test(`a PUT to a ${status} import is 403`, async () => {
      const { id, url } = await newImport();
      await t.db.sql`update contact_imports set status = ${status} where id = ${id}`;
      await expectXml(await PUT(url, CSV), 403, 'AccessDenied');
      expect(await store.head(importObjectKey(t.accountId, id))).toBeUndefined();
    });
  }

  test('a PUT more than 24 hours after creation is 403, even with an unexpired link', async () => {
    const { id, url } = await newImport();
    await t.db.sql`update contact_imports set created_at = now() - interval '25 hours' where id = ${id}`;
    await expectXml(await PUT(url, CSV), 403, 'AccessDenied');
    expect((await row(id)).status).toBe('awaiting-upload');
  });

  test('an expired link is 403 "Request has expired"', async () => {
    const { id } = await newImport();
    const token = store.tokens.sign({
      accountId: t.accountId,
      importId: id,
      expiresAt: Math.floor(Date.now() / 1000) - 1,
    });
    await expectXml(await PUT(`http://api.test/uploads/${token}`, CSV), 403, 'AccessDenied', 'Request has expired');
    expect((await row(id)).status).toBe('awaiting-upload');
  });

  test('forged, tampered and malformed tokens are 403', async () => {
    const { id, url } = await newImport();
    const token = url.split('/uploads/')[1]!;
    const [payload, sig] = token.split('.') as [string, string];
    const otherImport = Buffer.from(
      `${t.accountId}.00000000-0000-4000-8000-000000000000.${Math.floor(Date.now() / 1000) + 3600}`,
    ).toString('base64url');
    const foreign = new UploadTokens(Buffer.from('another secret')).sign({
      accountId: t.accountId,
      importId: id,
      expiresAt: Math.floor(Date.now() / 1000) + 3600,
    });
    for (const bad of [
      `${otherImport}.${sig}`,
      `${payload}.${sig.slice(0, -2)}AA`,
      foreign,
      payload,
      'x.y',
      '',
      `${payload}.${sig}.x`,
    ]) {
      await expectXml(await PUT(`http://api.test/uploads/${bad}`, CSV), 403, 'AccessDenied');
    }
    expect((await row(id)).status).toBe('awaiting-upload');
  });

  test('a token has one spelling: a twin MAC character, padding or a padded payload is refused as forged', async () => {
    const { id, url } = await newImport();
    const token = url.split('/uploads/')[1]!;
    const [payload, sig] = token.split('.') as [string, string];
    // 32 MAC bytes in 43 base64url characters: the last character's 2 low bits are spare, so it has 3 twins.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const at = alphabet.indexOf(sig.at(-1)!);
    const twins = [1, 2, 3].map((d) => `${payload}.${sig.slice(0, -1)}${alphabet[at - (at % 4) + ((at + d) % 4)]}`);
    for (const twin of twins)
      expect(Buffer.from(twin.split('.')[1]!, 'base64url')).toEqual(Buffer.from(sig, 'base64url'));
    for (const bad of [...twins, `${token}=`, `${token}==`, `${payload}=.${sig}`, `${payload}==.${sig}`]) {
      expect(store.tokens.verify(bad)).toBeUndefined();
      await expectXml(await PUT(`http://api.test/uploads/${bad}`, CSV), 403, 'AccessDenied');
    }
    expect((await row(id)).status).toBe('awaiting-upload');
    expect(store.tokens.verify(token)).toMatchObject({ accountId: t.accountId, importId: id });
  });

  test('a method other than PUT is 405', async () => {
    const { url } = await newImport();
    for (const method of ['GET', 'POST', 'DELETE']) {
      const res = await put(new Request(url, { method, body: method === 'POST' ? CSV : undefined }));
      await expectXml(res, 405, 'MethodNotAllowed');
    }
  });

  test('a Content-Length over 5 GB is refused at once with 400 EntityTooLarge', async () => {
    const { id, url } = await newImport();
    const res = await PUT(url, CSV, { 'content-length': String(5 * 1024 ** 3 + 1) });
    await expectXml(res, 400, 'EntityTooLarge');
    expect((await row(id)).status).toBe('awaiting-upload');
    expect(await store.head(importObjectKey(t.accountId, id))).toBeUndefined();
  });

  test('a body that grows past the limit is aborted with EntityTooLarge and its temp file deleted', async () => {
    const small = uploadHandler(t.deps, { maxBytes: 1000 });
    const { id, url } = await newImport();
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 5; i++) c.enqueue(new Uint8Array(300).fill(66));
        c.close();
      },
    });
    await expectXml(await small(new Request(url, { method: 'PUT', body })), 400, 'EntityTooLarge');
    expect(await leftovers(id)).toEqual([]);
    expect((await row(id)).status).toBe('awaiting-upload');
    expect(enqueued).toEqual([]);
  });
});

describe('with the worker pipeline (runImport)', () => {
  test('two PUTs before the start: the second file is the one imported; a PUT after the start is refused', async () => {
    const { id, url } = await newImport();
    expect((await PUT(url, 'Email\nfirst@example.com\n')).status).toBe(200);
    expect((await PUT(url, 'Email\nsecond@example.com\n')).status).toBe(200);
    await runImport({ sql: t.db.sql, storage: store, config: t.deps.config }, t.accountId, id);
    const got = (await t.call('GET', `/v1/contact-imports/${id}`)).body;
    expect(got).toMatchObject({ status: 'success', rowCount: 1, addedCount: 1 });
    const emails = await t.db
      .sql`select email from contacts where account_id = ${t.accountId} and first_import_id = ${id}`;
    expect(emails.map((e) => e.email)).toEqual(['second@example.com']);
    await expectXml(await PUT(url, 'Email\nthird@example.com\n'), 403, 'AccessDenied');
  });
});

describe('upload secret', () => {
  test('generated once with mode 0600 and shared by every process that loads it', async () => {
    const path = join(dir, 'secret-test', 'upload-secret');
    const loaded = await Promise.all(Array.from({ length: 8 }, () => loadUploadSecret(undefined, path)));
    expect(new Set(loaded.map((b) => b.toString())).size).toBe(1);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await loadUploadSecret(undefined, path)).equals(loaded[0]!)).toBe(true);
    expect((await loadUploadSecret('configured', path)).toString()).toBe('configured');
  });
});

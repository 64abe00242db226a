// POST /v1/contact-imports/{importId}/cancel, an extension beyond the contract (spec: Contact import
// status, one open import per account; DESIGN: order of checks). Runs against the real database,
// the local store's upload link and the worker's runImport, as uploads.test.ts does.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
// @ts-expect-error s3rver ships no type declarations
import S3rver from 's3rver';
import { loadConfig } from '../../src/config';
import { createImportQueue, type BullImportQueue } from '../../src/imports/bullmq-queue';
import { CANCELLED_REASON, expireUnused, NO_FILE_REASON, startRead } from '../../src/imports/lifecycle';
import { createStore, importObjectKey, LocalStore, type ObjectStore } from '../../src/storage';
import { runImport, UnrecoverableImportError } from '../../worker/import';
import { sweep } from '../../worker/sweep';
import { expectProblem, testApp, type Call, type TestApp } from '../helpers/app';
import { uploadBed } from '../helpers/upload-bed';
import { createAccount, createKey } from '../helpers/fixtures';

const CSV = 'Email\na@example.com\nb@example.com\n';
const bed = uploadBed('imports-cancel');
let t: TestApp;
let dir: string;
let store: LocalStore;
let put: (req: Request) => Promise<Response>;
let enqueued: string[];
beforeAll(() => {
  ({ t, dir, store, put, enqueued } = bed);
});
// Each test starts with no open import, so the one-open rule only bites where a test means it to.
beforeEach(async () => {
  await t.db.sql`delete from contacts`;
  await t.db.sql`delete from contact_imports`;
  enqueued.length = 0;
});

async function newImport(key?: string): Promise<{ id: string; url: string }> {
  const res = await t.call('POST', '/v1/contact-imports', {
    body: { columns: ['Email'], duplicateContactStrategy: 'overwrite' },
    key,
  });
  expect(res.status).toBe(201);
  return { id: res.body.id, url: res.body.uploadUrl };
}

const cancel = (id: string, opts: { body?: unknown; key?: string | null; raw?: string } = {}) =>
  t.call('POST', `/v1/contact-imports/${id}/cancel`, opts);
const get = (id: string) => t.call('GET', `/v1/contact-imports/${id}`);
const PUT = (url: string, body: string) => put(new Request(url, { method: 'PUT', body }));
const deps = () => ({ sql: t.db.sql, storage: store, config: t.deps.config });

async function row(id: string) {
  const [r] = await t.db.sql`select * from contact_imports where id = ${id}`;
  return r!;
}

const objectOf = (id: string) => store.head(importObjectKey(t.accountId, id));
/** Whatever the local store keeps for the import's key: the object's versions and any temp file. */
const filesOf = (id: string) =>
  readdir(join(dir, 'objects', `${importObjectKey(t.accountId, id)}.v`)).catch(() => [] as string[]);

function expectCancelled(res: Call, id: string) {
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toStartWith('application/json');
  expect(res.body).toMatchObject({ id, status: 'failed', method: 'api', failureReason: CANCELLED_REASON });
}

async function expectS3Xml(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/xml');
  expect(await res.text()).toContain(`<Error><Code>${code}</Code>`);
}

describe('POST /v1/contact-imports/{id}/cancel: an import that has not started', () => {
  test('awaiting-upload → 200 failed, cancelled; the account may create its next import at once (201)', async () => {
    const { id } = await newImport();
    // Blocked before the cancel: the open import holds the account's one slot.
    expectProblem(
      await t.call('POST', '/v1/contact-imports', { body: { columns: ['Email'], duplicateContactStrategy: 'keep' } }),
      409,
      'operation_in_progress',
    );

    const res = await cancel(id);
    expectCancelled(res, id);
    expect(res.body).toEqual({
      id,
      status: 'failed',
      method: 'api',
      addedCount: 0,
      updatedCount: 0,
      skippedCount: 0,
      malformedCount: 0,
      failureReason: 'The import was cancelled.',
      duplicateContactStrategy: 'overwrite',
      overwriteBrands: false,
      restoreDisabled: false,
      createdAt: (await row(id)).created_at.toISOString(),
    });
    expect((await get(id)).body).toEqual(res.body);
    const r = await row(id);
    expect(r.status).toBe('failed');
    expect(r.cancelled_at).toBeInstanceOf(Date);
    expect(r.started_at).toBeNull();

    const next = await t.call('POST', '/v1/contact-imports', {
      body: { columns: ['Email'], duplicateContactStrategy: 'keep' },
    });
    expect(next.status).toBe(201);
    expect(next.body.status).toBe('awaiting-upload');
    expect(next.body.id).not.toBe(id);
  });

  test('uploaded → 200 failed and cancelled, its file deleted; the queued job run later changes nothing', async () => {
    const { id, url } = await newImport();
    expect((await PUT(url, CSV)).status).toBe(200);
    expect((await row(id)).status).toBe('uploaded');
    expect(enqueued).toEqual([id]); // the job is queued: it will run after the cancel
    expect(await objectOf(id)).toMatchObject({ size: CSV.length });

    const res = await cancel(id);
    expectCancelled(res, id);
    expect(await objectOf(id)).toBeUndefined();
    expect(await filesOf(id)).toEqual([]);
    const before = await row(id);
    expect(before.cancelled_at).toBeInstanceOf(Date);

    // The queued job: runImport sees a final import and only cleans up.
    await runImport(deps(), t.accountId, id);
    const after = await row(id);
    expect(after).toEqual(before);
    expect(after.status).toBe('failed');
    expect(after.started_at).toBeNull();
    expect(after.attempts).toBe(0);
    expect((await get(id)).body).toEqual(res.body);
    const contacts = await t.db.sql<{ n: number }[]>`
      select count(*)::int as n from contacts where account_id = ${t.accountId}`;
    expect(contacts[0]!.n).toBe(0);
    expect((await newImport()).id).not.toBe(id);
  });

  test('the upload link refuses a PUT after the cancel (403 AccessDenied); nothing is stored or queued', async () => {
    const { id, url } = await newImport();
    expectCancelled(await cancel(id), id);
    await expectS3Xml(await PUT(url, CSV), 403, 'AccessDenied');
    expect((await row(id)).status).toBe('failed');
    expect((await row(id)).uploaded_at).toBeNull();
    expect(await objectOf(id)).toBeUndefined();
    expect(await filesOf(id)).toEqual([]);
    expect(enqueued).toEqual([]);
  });

  test('a PUT under way when the cancel comes is refused at its end (403); nothing is stored or queued', async () => {
    const { id, url } = await newImport();
    let finish!: () => void;
    const rest = new Promise<void>((resolve) => (finish = resolve));
    const body = new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(new TextEncoder().encode('Email\na@example.com\n'));
        await rest;
        c.enqueue(new TextEncoder().encode('b@example.com\n'));
        c.close();
      },
    });
    const upload = put(new Request(url, { method: 'PUT', body }));
    // The link let it in (the import was still awaiting its file): its temp file is being written.
    for (let i = 0; i < 100 && !(await filesOf(id)).some((n) => n.startsWith('.tmp-')); i++) await Bun.sleep(10);
    expect((await filesOf(id)).filter((n) => n.startsWith('.tmp-'))).toHaveLength(1);
    expectCancelled(await cancel(id), id);
    finish();
    await expectS3Xml(await upload, 403, 'AccessDenied');
    expect((await row(id)).status).toBe('failed');
    expect((await row(id)).uploaded_at).toBeNull();
    expect(await objectOf(id)).toBeUndefined();
    expect(await filesOf(id)).toEqual([]);
    expect(enqueued).toEqual([]);
  });

  test('an uploaded import cancelled, then its link used again: refused, and the import stays cancelled', async () => {
    const { id, url } = await newImport();
    expect((await PUT(url, CSV)).status).toBe(200);
    expectCancelled(await cancel(id), id);
    enqueued.length = 0;
    await expectS3Xml(await PUT(url, 'Email\nlate@example.com\n'), 403, 'AccessDenied');
    expect((await get(id)).body).toMatchObject({ status: 'failed', failureReason: CANCELLED_REASON });
    expect(await objectOf(id)).toBeUndefined();
    expect(enqueued).toEqual([]);
  });

  test('already cancelled → 200 with the same body; nothing changes (idempotent)', async () => {
    const { id, url } = await newImport();
    expect((await PUT(url, CSV)).status).toBe(200);
    const first = await cancel(id);
    expectCancelled(first, id);
    const before = await row(id);
    const again = await cancel(id);
    expectCancelled(again, id);
    expect(again.body).toEqual(first.body);
    expect(await row(id)).toEqual(before); // cancelled_at and updated_at are the first cancel's
  });

  test('two cancels at once: both 200 with the same body', async () => {
    const { id } = await newImport();
    const [a, b] = await Promise.all([cancel(id), cancel(id)]);
    expectCancelled(a!, id);
    expectCancelled(b!, id);
    expect(a!.body).toEqual(b!.body);
  });
});

describe('POST /v1/contact-imports/{id}/cancel: an import that started or ended is a 409', () => {
  async function expectConflict(id: string, detail: RegExp) {
    const before = await row(id);
    const body = expectProblem(await cancel(id), 409, 'conflict_error');
    expect(body.title).toBe('Conflict');
    expect(body.detail).toContain(id);
    expect(body.detail).toMatch(detail);
    expect(await row(id)).toEqual(before);
    return body;
  }

  test('importing → 409 conflict_error, the import unchanged', async () => {
    const { id, url } = await newImport();
    expect((await PUT(url, CSV)).status).toBe(200);
    await startRead(t.db.sql, t.accountId, id); // the worker's own start
    expect((await row(id)).status).toBe('importing');
    await expectConflict(id, /is importing/);
    expect((await get(id)).body).toMatchObject({ status: 'importing', percentComplete: 0 });
    expect(await objectOf(id)).toMatchObject({ size: CSV.length }); // the file the worker reads stays
  });

  test('success → 409 conflict_error, the import unchanged', async () => {
    const { id, url } = await newImport();
    expect((await PUT(url, CSV)).status).toBe(200);
    await runImport(deps(), t.accountId, id);
    expect((await row(id)).status).toBe('success');
    await expectConflict(id, /has succeeded/);
    expect((await get(id)).body).toMatchObject({ status: 'success', addedCount: 2 });
  });

  test('failed because no file arrived in 24 hours → 409 conflict_error naming the reason', async () => {
    const { id } = await newImport();
    await t.db.sql`update contact_imports set created_at = now() - interval '25 hours' where id = ${id}`;
    expect((await expireUnused(t.db.sql)).map((r) => r.id)).toEqual([id]);
    await expectConflict(id, new RegExp(`has failed \\(${NO_FILE_REASON.replaceAll('.', '\\.')}\\)`));
    expect((await row(id)).cancelled_at).toBeNull();
    expect((await get(id)).body).toMatchObject({ status: 'failed', failureReason: NO_FILE_REASON });
  });

  test('failed because the file could not be imported (a wrong header) → 409 conflict_error', async () => {
    const { id, url } = await newImport();
    expect((await PUT(url, 'Name\nAnn\n')).status).toBe(200);
    await expect(runImport(deps(), t.accountId, id)).rejects.toBeInstanceOf(UnrecoverableImportError);
    const reason = (await row(id)).failure_reason as string;
    expect((await row(id)).status).toBe('failed');
    expect(reason).not.toBe(CANCELLED_REASON);
    const body = await expectConflict(id, /has failed .*a finished import cannot be cancelled/);
    expect(body.detail).toContain(reason);
  });
});

describe('POST /v1/contact-imports/{id}/cancel: a race with the worker’s start', () => {
  test('cancel and startRead at the same moment: exactly one of them takes the import', async () => {
    for (let i = 0; i < 12; i++) {
      await t.db.sql`delete from contact_imports`;
      const { id, url } = await newImport();
      expect((await PUT(url, CSV)).status).toBe(200);
      // Staggered starts, so that either one may come first.
      const start = Bun.sleep(i % 3).then(() => startRead(t.db.sql, t.accountId, id));
      const [res] = await Promise.all([cancel(id), start]);
      const r = await row(id);
      if (res.status === 200) {
        // The cancel won: the start found nothing to take.
        expect([r.status, r.started_at, r.attempts, r.phase]).toEqual(['failed', null, 0, null]);
        expect(r.cancelled_at).toBeInstanceOf(Date);
      } else {
        expectProblem(res, 409, 'conflict_error');
        expect([r.status, r.cancelled_at, r.attempts]).toEqual(['importing', null, 1]);
      }
    }
  });
});

describe('POST /v1/contact-imports/{id}/cancel: request shape, existence and auth', () => {
  test('an empty JSON object is accepted as the body', async () => {
    const { id } = await newImport();
    expectCancelled(await cancel(id, { body: {} }), id);
  });

  test('a body with a field is a 400 pointing at it, and the import is not cancelled', async () => {
    const { id } = await newImport();
    const body = expectProblem(await cancel(id, { body: { reason: 'changed my mind' } }), 400, 'invalid_request_error');
    expect(body.detail).toBe('This request takes no body fields.');
    expect(body.errors).toEqual([{ detail: 'Unknown field reason.', pointer: '/reason' }]);
    expectProblem(await cancel(id, { body: [] }), 400, 'invalid_request_error');
    expectProblem(await cancel(id, { raw: 'not json', body: undefined }), 400, 'invalid_request_error');
    expect((await row(id)).status).toBe('awaiting-upload');
  });

  test('a query parameter is a 400 naming it, and the import is not cancelled', async () => {
    const { id } = await newImport();
    const res = await t.call('POST', `/v1/contact-imports/${id}/cancel?force=true`);
    const body = expectProblem(res, 400, 'invalid_request_error');
    expect(body.errors).toEqual([expect.objectContaining({ parameter: 'force' })]);
    expect((await row(id)).status).toBe('awaiting-upload');
  });

  test('a non-uuid id is the same 400 as GET gives', async () => {
    const body = expectProblem(await cancel('not-a-uuid'), 400, 'invalid_request_error');
    const ofGet = expectProblem(await get('not-a-uuid'), 400, 'invalid_request_error');
    expect(body.detail).toBe(ofGet.detail);
    expect(body.errors).toEqual(ofGet.errors);
  });

  test('an unknown id is 404 not_found_error', async () => {
    const body = expectProblem(await cancel('00000000-0000-4000-8000-000000000000'), 404, 'not_found_error');
    expect(body.detail).toContain('00000000-0000-4000-8000-000000000000');
  });

  test("another account's import is 404 not_found_error, and stays open", async () => {
    const other = await createAccount(t.db.sql, 'Other account');
    const otherKey = await createKey(t.db.sql, other);
    const { id } = await newImport(otherKey);
    const body = expectProblem(await cancel(id), 404, 'not_found_error');
    expect(body.detail).toBe(expectProblem(await get(id), 404, 'not_found_error').detail);
    expect((await row(id)).status).toBe('awaiting-upload');
    expect((await row(id)).cancelled_at).toBeNull();
    expectCancelled(await cancel(id, { key: otherKey }), id);
  });

  test('no key is 401 with WWW-Authenticate: Bearer; the import is not cancelled', async () => {
    const { id } = await newImport();
    const res = await cancel(id, { key: null });
    expectProblem(res, 401, 'authentication_error');
    expect(res.headers.get('www-authenticate') ?? '').toMatch(/^Bearer\b/);
    expect((await row(id)).status).toBe('awaiting-upload');
  });

  test('a key without imports:write is 403 permission_error; one with only imports:write may cancel', async () => {
    const { id } = await newImport();
    const readOnly = await createKey(t.db.sql, t.accountId, ['imports:read', 'contacts:write']);
    expectProblem(await cancel(id, { key: readOnly }), 403, 'permission_error');
    expect((await row(id)).status).toBe('awaiting-upload');
    const writeOnly = await createKey(t.db.sql, t.accountId, ['imports:write']);
    expectCancelled(await cancel(id, { key: writeOnly }), id);
  });
});

describe('with the s3 driver and a real queue: the presigned link cannot be refused', () => {
  const PREFIX = `test-cancel-${crypto.randomUUID().slice(0, 8)}`;
  let s3: TestApp;
  let server: S3rver;
  let storage: ObjectStore;
  let bull: BullImportQueue;

  beforeAll(async () => {
    server = new S3rver({
      address: '127.0.0.1',
      port: 0,
      silent: true,
      directory: join(dir, 's3'),
      configureBuckets: [{ name: 'imports', configs: [] }],
    });
    const { port } = (await server.run()) as unknown as { port: number };
    const env = {
      DATA_DIR: join(dir, 's3-data'),
      S3_BUCKET: 'imports',
      S3_ENDPOINT: `http://127.0.0.1:${port}`,
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'S3RVER',
    };
    storage = await createStore(loadConfig(env));
    s3 = await testApp({ storage }, env);
    bull = createImportQueue(s3.db.redisUrl, { prefix: PREFIX });
  });
  afterAll(async () => {
    await bull?.queue.obliterate({ force: true });
    await bull?.close();
    await s3?.close();
    await server?.close();
  });

  test('uploaded (sweep), cancelled: object removed, queued job harmless, a later PUT never taken', async () => {
    const created = await s3.call('POST', '/v1/contact-imports', {
      body: { columns: ['Email'], duplicateContactStrategy: 'overwrite' },
    });
    expect(created.status).toBe(201);
    const { id, uploadUrl } = created.body as { id: string; uploadUrl: string };
    const key = importObjectKey(s3.accountId, id);
    const run = () => sweep({ sql: s3.db.sql, storage, queue: bull, eventRetentionDays: 7 });
    expect((await fetch(uploadUrl, { method: 'PUT', body: CSV })).status).toBe(200);
    expect((await run()).arrived).toEqual([id]);
    expect(await bull.queue.getJob(id)).toBeDefined(); // queued before the cancel

    const first = await s3.call('POST', `/v1/contact-imports/${id}/cancel`);
    expectCancelled(first, id);
    expect(await storage.head(key)).toBeUndefined();

    // The job the sweep queued, run as the worker runs it: a final import is only cleaned up.
    await runImport({ sql: s3.db.sql, storage, config: s3.deps.config }, s3.accountId, id);
    const [r] = await s3.db
      .sql`select status, started_at, attempts, cancelled_at from contact_imports where id = ${id}`;
    expect([r!.status, r!.started_at, r!.attempts]).toEqual(['failed', null, 0]);
    expect(r!.cancelled_at).toBeInstanceOf(Date);
    const contacts = await s3.db.sql<{ n: number }[]>`
      select count(*)::int as n from contacts where account_id = ${s3.accountId}`;
    expect(contacts[0]!.n).toBe(0);

    // S3 takes a PUT for the link's whole hour; the import never does, and the sweep queues nothing.
    expect((await fetch(uploadUrl, { method: 'PUT', body: CSV })).status).toBe(200);
    expect(await run()).toMatchObject({ arrived: [], requeued: [] });
    const again = await s3.call('POST', `/v1/contact-imports/${id}/cancel`);
    expectCancelled(again, id);
    expect(again.body).toEqual(first.body);
    expect(await storage.head(key)).toBeUndefined(); // a repeated cancel removes the late file too
  });
});

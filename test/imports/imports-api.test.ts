// POST/GET /v1/contact-imports (spec: Contact import, POST /v1/contact-imports, GET …; DESIGN: order
// of checks, pointers). The upload link itself is covered in uploads.test.ts.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config';
import type { ImportQueue } from '../../src/imports/queue';
import { createStore } from '../../src/storage';
import { expectProblem, DOCS_URL, testApp, type TestApp } from '../helpers/app';
import { createAccount, createAttribute, createBrand, createKey } from '../helpers/fixtures';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const PUBLIC_URL = 'http://api.test';
let t: TestApp;
let dir: string;
const enqueued: string[] = [];
const queue: ImportQueue = {
  enqueueImport: async (_a, id) => void enqueued.push(id),
  ensureImport: async () => 'live',
  ping: async () => 'PONG',
  close: async () => {},
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'imports-api-'));
  const env = { DATA_DIR: dir, STORAGE_DIR: join(dir, 'objects'), PUBLIC_URL, DOCS_URL };
  const storage = await createStore(loadConfig(env));
  t = await testApp({ storage, queue }, env);
  await createAttribute(t.db.sql, t.accountId, 'First Name', 'string');
  await createAttribute(t.db.sql, t.accountId, 'Work email', 'email');
});
afterAll(async () => {
  await t.close();
  await rm(dir, { recursive: true, force: true });
});
// Each test starts with no open import, so the one-open rule only bites where a test means it to.
beforeEach(async () => {
  await t.db.sql`delete from contact_imports`;
});

const create = (body: unknown, key?: string) => t.call('POST', '/v1/contact-imports', { body, key });
const valid = { columns: ['Email'], duplicateContactStrategy: 'overwrite' };

function pointersOf(body: { errors?: { pointer?: string }[] }): (string | undefined)[] {
  return (body.errors ?? []).map((e) => e.pointer);
}

describe('POST /v1/contact-imports: success', () => {
  test('201 with id, awaiting-upload, an upload link on the API and an expiry one hour out', async () => {
    const before = Date.now();
    const res = await create(valid);
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['id', 'status', 'uploadExpiresAt', 'uploadUrl']);
    expect(res.body.id).toMatch(UUID_RE);
    expect(res.body.status).toBe('awaiting-upload');
    expect(res.body.uploadUrl).toStartWith(`${PUBLIC_URL}/uploads/`);
    const expires = Date.parse(res.body.uploadExpiresAt);
    expect(expires - before).toBeGreaterThan(3600_000 - 5_000);
    expect(expires - Date.now()).toBeLessThanOrEqual(3600_000 + 5_000);
    expect(enqueued).not.toContain(res.body.id); // enqueued only when the file arrives
  });

  test('columns are stored as canonical schema names in file order, options as sent', async () => {
    const brand = await createBrand(t.db.sql, t.accountId, 'Stored brand', { enabled: false });
    const res = await create({
      columns: [' first NAME ', 'brand', 'EMAIL', 'work Email'],
      duplicateContactStrategy: 'keep',
      brandIds: [brand.toUpperCase(), brand],
      overwriteBrands: true,
      restoreDisabled: true,
      publishBrandSubscribeEvents: false,
    });
    expect(res.status).toBe(201);
    const [row] = await t.db.sql`select * from contact_imports where id = ${res.body.id}`;
    expect(row!.columns).toEqual(['First Name', 'Brand', 'Email', 'Work email']);
    expect(row!.method).toBe('api');
    expect(row!.duplicate_contact_strategy).toBe('keep');
    expect(row!.brand_ids).toEqual([brand]);
    expect([row!.overwrite_brands, row!.restore_disabled, row!.publish_events]).toEqual([true, true, false]);
  });

  test('defaults: overwriteBrands and restoreDisabled false, events published', async () => {
    const res = await create(valid);
    const [row] = await t.db.sql`select * from contact_imports where id = ${res.body.id}`;
    expect([row!.overwrite_brands, row!.restore_disabled, row!.publish_events]).toEqual([false, false, true]);
    const got = await t.call('GET', `/v1/contact-imports/${res.body.id}`);
    expect(got.body).toEqual({
      id: res.body.id,
      status: 'awaiting-upload',
      method: 'api',
      addedCount: 0,
      updatedCount: 0,
      skippedCount: 0,
      malformedCount: 0,
      duplicateContactStrategy: 'overwrite',
      overwriteBrands: false,
      restoreDisabled: false,
      createdAt: expect.any(String),
    });
  });
});

describe('POST /v1/contact-imports: column rules', () => {
  test('a column that is not a schema attribute points at /columns/<index>', async () => {
    const body = expectProblem(
      await create({ ...valid, columns: ['Email', 'Nickname'] }),
      400,
      'invalid_request_error',
    );
    expect(pointersOf(body)).toEqual(['/columns/1']);
    expect(body.detail).toContain('Nickname');
  });

  test('a derived sub-attribute is not a column', async () => {
    const body = expectProblem(
      await create({ ...valid, columns: ['Email', 'Work email:md5'] }),
      400,
      'invalid_request_error',
    );
    expect(pointersOf(body)).toEqual(['/columns/1']);
  });

  test('a column declared twice, ignoring case, points at the repeat', async () => {
    const body = expectProblem(
      await create({ ...valid, columns: ['Email', 'first name', 'FIRST NAME'] }),
      400,
      'invalid_request_error',
    );
    expect(pointersOf(body)).toEqual(['/columns/2']);
  });

  test('Email twice is a duplicate too', async () => {
    const body = expectProblem(await create({ ...valid, columns: ['email', 'Email'] }), 400, 'invalid_request_error');
    expect(pointersOf(body)).toEqual(['/columns/1']);
  });

  test('no Email column points at /columns (a custom email attribute is not the identity)', async () => {
    const body = expectProblem(
      await create({ ...valid, columns: ['Work email', 'First Name'] }),
      400,
      'invalid_request_error',
    );
    expect(pointersOf(body)).toEqual(['/columns']);
    expect(body.detail).toContain('Email');
  });

  test('every bad column is reported, in order', async () => {
    const body = expectProblem(
      await create({ ...valid, columns: ['Nope', 'Brand', 'brand', ''] }),
      400,
      'invalid_request_error',
    );
    expect(pointersOf(body)).toEqual(['/columns/0', '/columns/2', '/columns/3', '/columns']);
  });

  test('the predefined Brand column is accepted', async () => {
    expect((await create({ ...valid, columns: ['Brand', 'Email'] })).status).toBe(201);
  });
});

describe('POST /v1/contact-imports: brandIds', () => {
  test('an id that is no brand of the account is a 400 at /brandIds', async () => {
    const live = await createBrand(t.db.sql, t.accountId, 'Live');
    const other = await createAccount(t.db.sql);
    const foreign = await createBrand(t.db.sql, other, 'Foreign');
    const deleted = await createBrand(t.db.sql, t.accountId, 'Deleted');
    await t.db.sql`update brands set deleted_at = now() where id = ${deleted}`;
    for (const id of [foreign, deleted, '00000000-0000-4000-8000-000000000000']) {
      const body = expectProblem(await create({ ...valid, brandIds: [live, id] }), 400, 'invalid_request_error');
      expect(pointersOf(body)).toEqual(['/brandIds']);
      expect(body.detail).toContain(id);
    }
    expect(await t.db.sql`select 1 from contact_imports`).toHaveLength(0);
  });

  test('column and brand errors are reported together', async () => {
    const body = expectProblem(
      await create({ ...valid, columns: ['Email', 'x'], brandIds: ['00000000-0000-4000-8000-000000000000'] }),
      400,
      'invalid_request_error',
    );
    expect(pointersOf(body)).toEqual(['/columns/1', '/brandIds']);
  });
});

describe('POST /v1/contact-imports: body validation', () => {
  const cases: [string, unknown, string][] = [
    ['columns missing', { duplicateContactStrategy: 'skip' }, '/columns'],
    ['columns empty', { columns: [], duplicateContactStrategy: 'skip' }, '/columns'],
    ['columns not strings', { columns: ['Email', 3], duplicateContactStrategy: 'skip' }, '/columns/1'],
    ['strategy missing', { columns: ['Email'] }, '/duplicateContactStrategy'],
    ['strategy unknown', { columns: ['Email'], duplicateContactStrategy: 'merge' }, '/duplicateContactStrategy'],
    ['brandIds not uuids', { ...valid, brandIds: ['nope'] }, '/brandIds/0'],
    ['overwriteBrands not boolean', { ...valid, overwriteBrands: 'yes' }, '/overwriteBrands'],
    ['restoreDisabled not boolean', { ...valid, restoreDisabled: 1 }, '/restoreDisabled'],
    [
      'publishBrandSubscribeEvents not boolean',
      { ...valid, publishBrandSubscribeEvents: null },
      '/publishBrandSubscribeEvents',
    ],
  ];
  for (const [name, body, ptr] of cases) {
    test(`${name} → 400 at ${ptr}`, async () => {
      const problem = expectProblem(await create(body), 400, 'invalid_request_error');
      expect(pointersOf(problem)).toContain(ptr);
    });
  }

  test('no body at all is a 400', async () => {
    expectProblem(await t.call('POST', '/v1/contact-imports'), 400, 'invalid_request_error');
  });

  test('an unknown field (a typo) is a 400 pointing at it, not silently ignored', async () => {
    const problem = expectProblem(await create({ ...valid, overwritebrands: true }), 400, 'invalid_request_error');
    expect(pointersOf(problem)).toEqual(['/overwritebrands']);
    const [row] = await t.db.sql<{ n: number }[]>`select count(*)::int as n from contact_imports`;
    expect(row!.n).toBe(0);
  });

  test('body shape is checked before the columns against the schema', async () => {
    const problem = expectProblem(
      await create({ columns: ['Nope'], duplicateContactStrategy: 'merge' }),
      400,
      'invalid_request_error',
    );
    expect(pointersOf(problem)).toEqual(['/duplicateContactStrategy']);
  });
});

describe('POST /v1/contact-imports: auth', () => {
  test('401 without a key, 403 without imports:write', async () => {
    expectProblem(await create(valid, null as never), 401, 'authentication_error');
    const readOnly = await createKey(t.db.sql, t.accountId, ['imports:read']);
    expectProblem(await create(valid, readOnly), 403, 'permission_error');
  });
});

async function openImport(
  status: string,
  extra: {
    createdSecondsAgo?: number;
    startedSecondsAgo?: number;
    percent?: number;
    size?: number;
    method?: string;
  } = {},
) {
  const startedAt =
    extra.startedSecondsAgo === undefined ? null : t.db.sql`now() - ${extra.startedSecondsAgo} * interval '1 second'`;
  const [row] = await t.db.sql<{ id: string }[]>`
    insert into contact_imports (account_id, status, method, columns, duplicate_contact_strategy, created_at,
                                 started_at, percent_complete, object_size)
    values (${t.accountId}, ${status}, ${extra.method ?? 'api'}, '{Email}', 'skip',
            now() - ${extra.createdSecondsAgo ?? 0} * interval '1 second',
            ${startedAt},
            ${extra.percent ?? null}, ${extra.size ?? null})
    returning id`;
  return row!.id;
}

describe('POST /v1/contact-imports: one open import per account (409)', () => {
  test('a second create while one awaits its upload: 409 with Retry-After until the 24-hour deadline', async () => {
    expect((await create(valid)).status).toBe(201);
    const res = await create(valid);
    const body = expectProblem(res, 409, 'operation_in_progress');
    expect(body.type).toBe(`${DOCS_URL}/error-codes#operation_in_progress`);
    const retry = Number(res.headers.get('retry-after'));
    expect(retry).toBeGreaterThan(24 * 3600 - 60);
    expect(retry).toBeLessThanOrEqual(24 * 3600);
    expect(await t.db.sql`select 1 from contact_imports`).toHaveLength(1);
  });

  test('an old unused link: Retry-After shrinks with the time left', async () => {
    await openImport('awaiting-upload', { createdSecondsAgo: 24 * 3600 - 100 });
    const res = await create(valid);
    expectProblem(res, 409, 'operation_in_progress');
    const retry = Number(res.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(100);
    expect(retry).toBeLessThan(120);
  });

  test('a manual import that is importing blocks too; Retry-After extrapolates its progress', async () => {
    await openImport('importing', { method: 'manual', startedSecondsAgo: 100, percent: 50 });
    const res = await create(valid);
    expectProblem(res, 409, 'operation_in_progress');
    const retry = Number(res.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(95);
    expect(retry).toBeLessThanOrEqual(110);
  });

  test('an uploaded import blocks; Retry-After is at least 1 and grows with the file size', async () => {
    const id = await openImport('uploaded', { size: 0 });
    const small = Number((await create(valid)).headers.get('retry-after'));
    await t.db.sql`update contact_imports set object_size = ${1024 ** 3} where id = ${id}`;
    const big = Number((await create(valid)).headers.get('retry-after'));
    expect(small).toBeGreaterThanOrEqual(1);
    expect(big).toBeGreaterThan(small);
  });

  test('stored-data checks (400) come before the conflict (409)', async () => {
    await openImport('importing');
    expectProblem(await create({ ...valid, columns: ['Nope'] }), 400, 'invalid_request_error');
  });

  test('finished imports do not block; other accounts are not blocked', async () => {
    await openImport('failed');
    await openImport('success');
    expect((await create(valid)).status).toBe(201);
    const other = await createAccount(t.db.sql);
    const otherKey = await createKey(t.db.sql, other);
    expect((await create(valid, otherKey)).status).toBe(201);
  });

  test('concurrent creates: exactly one wins', async () => {
    const results = await Promise.all(Array.from({ length: 5 }, () => create(valid)));
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
  });
});

describe('GET /v1/contact-imports', () => {
  async function seed(n: number, account = t.accountId) {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const [row] = await t.db.sql<{ id: string }[]>`
        insert into contact_imports (account_id, status, method, columns, duplicate_contact_strategy, created_at,
                                     updated_count, skipped_count)
        values (${account}, 'success', ${i % 2 ? 'manual' : 'api'}, '{Email}', 'keep',
                now() - ${n - i} * interval '1 minute', 0, 0)
        returning id`;
      ids.push(row!.id);
    }
    return ids.reverse(); // newest first
  }

  test('newest first, API and manual imports, paged', async () => {
    const ids = await seed(12);
    await seed(3, await createAccount(t.db.sql));
    const p1 = await t.call('GET', '/v1/contact-imports?pageSize=10');
    expect(p1.status).toBe(200);
    expect(p1.body.data.map((i: { id: string }) => i.id)).toEqual(ids.slice(0, 10));
    expect(p1.body.pagination).toEqual({ page: 1, pageSize: 10, totalCount: 12, totalPages: 2 });
    expect(new Set(p1.body.data.map((i: { method: string }) => i.method))).toEqual(new Set(['api', 'manual']));
    const p2 = await t.call('GET', '/v1/contact-imports?page=2&pageSize=10');
    expect(p2.body.data.map((i: { id: string }) => i.id)).toEqual(ids.slice(10));
    const past = await t.call('GET', '/v1/contact-imports?page=5&pageSize=10');
    expect(past.body).toEqual({ data: [], pagination: { page: 5, pageSize: 10, totalCount: 12, totalPages: 2 } });
  });

  test('a repeated page parameter is a 400 naming it', async () => {
    const problem = expectProblem(
      await t.call('GET', '/v1/contact-imports?page=1&page=2'),
      400,
      'invalid_request_error',
    );
    expect(problem.errors).toEqual([{ detail: expect.any(String), parameter: 'page' }]);
  });

  test('defaults to page 1 of 200; an empty account has totalPages 0', async () => {
    const res = await t.call('GET', '/v1/contact-imports');
    expect(res.body).toEqual({ data: [], pagination: { page: 1, pageSize: 200, totalCount: 0, totalPages: 0 } });
  });

  test('bad page parameters and unknown parameters are 400 naming the parameter', async () => {
    for (const [q, parameter] of [
      ['pageSize=5', 'pageSize'],
      ['pageSize=201', 'pageSize'],
      ['page=0', 'page'],
      ['sort=name', 'sort'],
    ]) {
      const body = expectProblem(await t.call('GET', `/v1/contact-imports?${q}`), 400, 'invalid_request_error');
      expect(body.errors?.[0]?.parameter).toBe(parameter);
    }
  });

  test('needs imports:read', async () => {
    const key = await createKey(t.db.sql, t.accountId, ['contacts:read']);
    expectProblem(await t.call('GET', '/v1/contact-imports', { key }), 403, 'permission_error');
  });
});

describe('GET /v1/contact-imports/{importId}', () => {
  test("400 for a non-UUID id, 404 for an unknown or another account's import", async () => {
    expectProblem(await t.call('GET', '/v1/contact-imports/nope'), 400, 'invalid_request_error');
    expectProblem(
      await t.call('GET', '/v1/contact-imports/00000000-0000-4000-8000-000000000000'),
      404,
      'not_found_error',
    );
    const other = await createKey(t.db.sql, await createAccount(t.db.sql));
    const created = await create(valid, other);
    expectProblem(await t.call('GET', `/v1/contact-imports/${created.body.id}`), 404, 'not_found_error');
  });

  // Every counter and leftover is set on every row, so presence is decided by status alone.
  async function rowIn(
    status: string,
    counts: { rowCount?: number | null; updated?: number | null; dupes?: number | null } = {},
  ) {
    const [row] = await t.db.sql<{ id: string }[]>`
      insert into contact_imports (account_id, status, method, columns, duplicate_contact_strategy, row_count,
        added_count, updated_count, skipped_count, malformed_count, duplicate_in_file_count, percent_complete,
        failure_reason, completed_at)
      values (${t.accountId}, ${status}, 'api', '{Email}', 'overwrite',
        ${counts.rowCount === undefined ? 10 : counts.rowCount}, 4,
        ${counts.updated === undefined ? 3 : counts.updated}, ${counts.updated === undefined ? 3 : counts.updated}, 2,
        ${counts.dupes === undefined ? 1 : counts.dupes}, 40, 'boom', now())
      returning id`;
    return (await t.call('GET', `/v1/contact-imports/${row!.id}`)).body;
  }

  const always = [
    'addedCount',
    'createdAt',
    'duplicateContactStrategy',
    'id',
    'malformedCount',
    'method',
    'overwriteBrands',
    'restoreDisabled',
    'status',
  ];
  const counts = ['duplicateInFileCount', 'rowCount', 'skippedCount', 'updatedCount'];
  const expected: Record<string, string[]> = {
    'awaiting-upload': [],
    uploaded: [],
    importing: ['percentComplete'],
    failed: ['failureReason'],
    success: ['completedAt'],
  };
  for (const [status, extra] of Object.entries(expected)) {
    test(`${status}: ${extra.join(', ') || 'no status-specific field'}`, async () => {
      const body = await rowIn(status);
      expect(Object.keys(body).sort()).toEqual([...always, ...counts, ...extra].sort());
      expect(body.status).toBe(status);
      if (status === 'importing') expect(body.percentComplete).toBe(40);
      if (status === 'failed') expect(body.failureReason).toBe('boom');
      expect([
        body.rowCount,
        body.addedCount,
        body.updatedCount,
        body.skippedCount,
        body.malformedCount,
        body.duplicateInFileCount,
      ]).toEqual([10, 4, 3, 3, 2, 1]);
    });
  }

  test('counts not known yet (rowCount, duplicateInFileCount) or never kept (updated/skipped) are absent', async () => {
    const body = await rowIn('importing', { rowCount: null, updated: null, dupes: null });
    for (const k of ['rowCount', 'updatedCount', 'skippedCount', 'duplicateInFileCount'])
      expect(body).not.toHaveProperty(k);
    expect(body.percentComplete).toBe(40);
  });

  test('importing before the first batch reports 0%', async () => {
    const [row] = await t.db.sql<{ id: string }[]>`
      insert into contact_imports (account_id, status, method, columns, duplicate_contact_strategy)
      values (${t.accountId}, 'importing', 'manual', '{Email}', 'skip') returning id`;
    expect((await t.call('GET', `/v1/contact-imports/${row!.id}`)).body.percentComplete).toBe(0);
  });
});

// POST /v1/suppression-lists/{id}/records and the import history it writes, against a real database.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { holdList } from '../../src/suppressions/bulk/list-guard';
import { expectProblem, testApp, type TestApp } from '../helpers/app';
import { createAccount, createKey, createSuppressionList } from '../helpers/fixtures';

let t: TestApp;
beforeAll(async () => {
  t = await testApp();
});
afterAll(() => t.close());

const md5 = (s: string) => createHash('md5').update(s).digest('hex');
const sha512 = (s: string) => createHash('sha512').update(s).digest('hex');
const NOBODY = '00000000-0000-4000-8000-000000000000';
type Format = 'plain text' | 'md5' | 'sha512';

const newList = (format: Format, name = `list ${crypto.randomUUID()}`) =>
  createSuppressionList(t.db.sql, t.accountId, name, format);
const add = (listId: string, records: unknown, key?: string) =>
  t.call('POST', `/v1/suppression-lists/${listId}/records`, { body: { records }, key });
const getList = async (listId: string) => (await t.call('GET', `/v1/suppression-lists/${listId}`)).body;
const history = async (listId: string, query = '') =>
  (await t.call('GET', `/v1/suppression-lists/${listId}/imports${query}`)).body;

/** The stored values of a list, as hex, sorted. */
async function stored(listId: string): Promise<string[]> {
  const rows = await t.db.sql<{ v: string }[]>`
    select encode(value, 'hex') as v from suppression_records
    where account_id = ${t.accountId} and list_id = ${listId} order by value`;
  return rows.map((r) => r.v);
}

describe('POST /v1/suppression-lists/{id}/records: md5 lists', () => {
  test('stores 16 raw bytes per record, trimmed and lowercased', async () => {
    const list = await newList('md5');
    const a = md5('a');
    const b = md5('b');
    const res = await add(list, [a.toUpperCase(), `  ${b}\t`]);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ importId: expect.any(String), totalCount: 2, addedCount: 2, duplicateCount: 0 });
    expect(await stored(list)).toEqual([a, b].sort());
    const [len] = await t.db.sql<
      { n: number }[]
    >`select max(length(value))::int as n from suppression_records where list_id = ${list}`;
    expect(len!.n).toBe(16);
  });

  test.each([
    ['31 hex digits', md5('x').slice(1)],
    ['33 hex digits', `${md5('x')}0`],
    ['a non-hex digit', `g${md5('x').slice(1)}`],
    ['a sha512 digest', sha512('x')],
    ['an email address', 'ann@example.com'],
    ['an empty string', ''],
    ['hex with inner space', `${md5('x').slice(0, 16)} ${md5('x').slice(16)}`],
  ])('refuses %s', async (_, record) => {
    const list = await newList('md5');
    const body = expectProblem(await add(list, [md5('ok'), record]), 400, 'invalid_request_error');
    expect(body.errors[0].pointer).toBe('/records/1');
    expect(await stored(list)).toEqual([]);
  });
});

describe('POST /v1/suppression-lists/{id}/records: sha512 lists', () => {
  test('stores 64 raw bytes per record, trimmed and lowercased', async () => {
    const list = await newList('sha512');
    const a = sha512('a');
    const res = await add(list, [` ${a.toUpperCase()} `]);
    expect(res.body).toMatchObject({ totalCount: 1, addedCount: 1, duplicateCount: 0 });
    expect(await stored(list)).toEqual([a]);
  });

  test.each([
    ['127 hex digits', sha512('x').slice(1)],
    ['129 hex digits', `${sha512('x')}f`],
    ['an md5 digest', md5('x')],
    ['a non-hex digit', `${sha512('x').slice(0, 127)}z`],
  ])('refuses %s', async (_, record) => {
    const list = await newList('sha512');
    const body = expectProblem(await add(list, [record]), 400, 'invalid_request_error');
    expect(body.errors).toEqual([{ detail: expect.any(String), pointer: '/records/0' }]);
  });
});

describe('POST /v1/suppression-lists/{id}/records: plain text lists', () => {
  test('stores the UTF-8 of the trimmed, lowercased address', async () => {
    const list = await newList('plain text');
    const res = await add(list, ['  Ann.Lee@Example.COM ', 'bob+tag@mail.example.org']);
    expect(res.body).toMatchObject({ totalCount: 2, addedCount: 2, duplicateCount: 0 });
    const hex = (await stored(list)).map((h) => Buffer.from(h, 'hex').toString('utf8')).sort();
    expect(hex).toEqual(['ann.lee@example.com', 'bob+tag@mail.example.org']);
  });

  test.each([
    ['no @', 'ann.example.com'],
    ['two @', 'ann@lee@example.com'],
    ['an undotted domain', 'ann@localhost'],
    ['an inner space', 'ann lee@example.com'],
    ['a control character', 'ann\u0001@example.com'],
    ['more than 254 characters', `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.com`],
    ['an md5 digest', md5('x')],
  ])('refuses an address with %s', async (_, record) => {
    const list = await newList('plain text');
    const body = expectProblem(await add(list, [record]), 400, 'invalid_request_error');
    expect(body.errors[0].pointer).toBe('/records/0');
  });
});

describe('POST /v1/suppression-lists/{id}/records: a rejected batch', () => {
  test('names every failing zero-based index, points at the first, and adds nothing', async () => {
    const list = await newList('md5');
    const res = await add(list, [md5('0'), 'bad-1', md5('2'), 'bad-3', 'bad-4']);
    const body = expectProblem(res, 400, 'invalid_request_error');
    expect(body.detail).toContain('1, 3, 4');
    expect(body.detail).not.toMatch(/\b[02]\b/);
    expect(body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(['/records/1', '/records/3', '/records/4']);
    expect(body.errors[0].pointer).toBe('/records/1');
    expect(await stored(list)).toEqual([]);
    expect((await getList(list)).recordCount).toBe(0);
    expect((await history(list)).data).toEqual([]);
  });

  test('an exact repeat as sent is a 400 pointing at the second occurrence', async () => {
    const list = await newList('md5');
    const body = expectProblem(await add(list, [md5('a'), md5('b'), md5('a')]), 400, 'invalid_request_error');
    expect(body.errors).toEqual([{ detail: expect.any(String), pointer: '/records/2' }]);
    expect(await stored(list)).toEqual([]);
  });

  test.each([
    ['a missing array', {}, '/records'],
    ['an empty array', { records: [] }, '/records'],
    ['a string instead of an array', { records: md5('a') }, '/records'],
    ['a non-string entry', { records: [md5('a'), 42] }, '/records/1'],
    ['a null entry', { records: [null] }, '/records/0'],
  ])('%s is a 400', async (_, body, pointer) => {
    const list = await newList('md5');
    const res = await t.call('POST', `/v1/suppression-lists/${list}/records`, { body });
    expect(expectProblem(res, 400, 'invalid_request_error').errors[0].pointer).toBe(pointer);
  });

  test('1000 records are accepted, 1001 are a 400', async () => {
    const list = await newList('md5');
    const many = (n: number, salt: string) => Array.from({ length: n }, (_, i) => md5(`${salt}${i}`));
    const tooMany = expectProblem(await add(list, many(1001, 'x')), 400, 'invalid_request_error');
    expect(tooMany.errors[0].pointer).toBe('/records');
    expect(await stored(list)).toEqual([]);
    expect((await add(list, many(1000, 'y'))).body).toMatchObject({
      totalCount: 1000,
      addedCount: 1000,
      duplicateCount: 0,
    });
  });

  test('an unknown body field (a typo) is a 400 pointing at it, and adds nothing', async () => {
    const list = await newList('md5');
    const res = await t.call('POST', `/v1/suppression-lists/${list}/records`, {
      body: { records: [md5('a')], record: [md5('b')] },
    });
    const problem = expectProblem(res, 400, 'invalid_request_error');
    expect(problem.errors.map((e: { pointer?: string }) => e.pointer)).toEqual(['/record']);
    expect(await stored(list)).toEqual([]);
  });

  test('a body that is not JSON is a 400', async () => {
    const list = await newList('md5');
    const res = await t.call('POST', `/v1/suppression-lists/${list}/records`, {
      raw: '{"records": [',
      headers: { 'content-type': 'application/json' },
    });
    expectProblem(res, 400, 'invalid_request_error');
  });
});

describe('POST /v1/suppression-lists/{id}/records: duplicates and counters', () => {
  test('entries equal after normalisation and entries already on the list count as duplicates', async () => {
    const list = await newList('md5');
    const [a, b, c] = [md5('a'), md5('b'), md5('c')];
    expect((await add(list, [a])).body).toMatchObject({ totalCount: 1, addedCount: 1, duplicateCount: 0 });
    const res = await add(list, [a, b, b.toUpperCase(), ` ${b}`, c]);
    expect(res.body).toMatchObject({ totalCount: 5, addedCount: 2, duplicateCount: 3 });
    expect(await stored(list)).toEqual([a, b, c].sort());
    expect((await getList(list)).recordCount).toBe(3);
  });

  test('resending a batch is safe: nothing added, recordCount and updatedAt unchanged', async () => {
    const list = await newList('plain text');
    const batch = ['x@example.com', 'Y@example.com'];
    expect((await add(list, batch)).body).toMatchObject({ addedCount: 2, duplicateCount: 0 });
    const before = await getList(list);
    expect(before.recordCount).toBe(2);
    const again = await add(list, batch);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ totalCount: 2, addedCount: 0, duplicateCount: 2 });
    expect(await getList(list)).toEqual(before);
  });

  test('updatedAt moves when something is added', async () => {
    const list = await newList('md5');
    const before = await getList(list);
    await add(list, [md5('new')]);
    const after = await getList(list);
    expect(after.recordCount).toBe(1);
    expect(Date.parse(after.updatedAt)).toBeGreaterThan(Date.parse(before.updatedAt));
    expect(after.createdAt).toBe(before.createdAt);
  });

  test('every accepted request is a completed api import with its counts', async () => {
    const list = await newList('md5');
    const res = await add(list, [md5('1'), md5('1').toUpperCase()]);
    const imp = await t.call('GET', `/v1/suppression-lists/${list}/imports/${res.body.importId}`);
    expect(imp.status).toBe(200);
    expect(imp.body).toEqual({
      id: res.body.importId,
      suppressionListId: list,
      status: 'completed',
      method: 'api',
      totalCount: 2,
      addedCount: 1,
      duplicateCount: 1,
      malformedCount: 0,
      createdAt: expect.any(String),
      completedAt: expect.any(String),
    });
    expect(Date.parse(imp.body.completedAt)).toBeGreaterThanOrEqual(Date.parse(imp.body.createdAt));
  });
});

describe('POST /v1/suppression-lists/{id}/records: addressing and order of checks', () => {
  test('a non-uuid list id is a 400 naming the parameter', async () => {
    const body = expectProblem(await add('not-a-uuid', [md5('a')]), 400, 'invalid_request_error');
    expect(body.errors[0].parameter).toBe('suppressionListId');
  });

  test('an unknown list is a 404', async () => {
    expectProblem(await add(NOBODY, [md5('a')]), 404, 'not_found_error');
  });

  test("another account's list is a 404 and stays untouched", async () => {
    const other = await createAccount(t.db.sql, 'other');
    const theirs = await createSuppressionList(t.db.sql, other, 'theirs', 'md5');
    expectProblem(await add(theirs, [md5('a')]), 404, 'not_found_error');
    const [row] = await t.db.sql<
      { n: number }[]
    >`select count(*)::int as n from suppression_records where list_id = ${theirs}`;
    expect(row!.n).toBe(0);
  });

  test('a malformed body is a 400 before the unknown list is a 404', async () => {
    expectProblem(await add(NOBODY, []), 400, 'invalid_request_error');
  });

  test('a key without suppressions:write is a 403; without a key a 401', async () => {
    const list = await newList('md5');
    const readOnly = await createKey(t.db.sql, t.accountId, ['suppressions:read']);
    expectProblem(await add(list, [md5('a')], readOnly), 403, 'permission_error');
    const res = await t.call('POST', `/v1/suppression-lists/${list}/records`, {
      body: { records: [md5('a')] },
      key: null,
    });
    expectProblem(res, 401, 'authentication_error');
    expect(await stored(list)).toEqual([]);
  });
});

describe('one import at a time per list', () => {
  test('parallel add-records: each is 200 with exact counts or 409 with Retry-After; no count is lost', async () => {
    const list = await newList('md5');
    // Overlapping batches: request i holds records i*500 … i*500+999, so neighbours share 500.
    const batches = Array.from({ length: 24 }, (_, i) =>
      Array.from({ length: 1000 }, (_, j) => md5(String(i * 500 + j))),
    );
    const responses = await Promise.all(batches.map((b) => add(list, b)));
    const ok = responses.filter((r) => r.status === 200);
    const busy = responses.filter((r) => r.status !== 200);
    for (const r of ok) {
      expect(r.body.totalCount).toBe(1000);
      expect(r.body.addedCount + r.body.duplicateCount).toBe(1000);
    }
    for (const r of busy) {
      expectProblem(r, 409, 'operation_in_progress');
      expect(r.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    }
    expect(ok.length).toBeGreaterThan(0);
    expect(busy.length).toBeGreaterThan(0);
    const added = ok.reduce((s, r) => s + r.body.addedCount, 0);
    expect((await getList(list)).recordCount).toBe(added);
    expect((await stored(list)).length).toBe(added);
    // The records of the successful batches, and only those, are on the list.
    const expected = new Set(ok.flatMap((r) => batches[responses.indexOf(r)]!));
    expect(added).toBe(expected.size);
    const imports = (await history(list)).data;
    expect(imports).toHaveLength(ok.length);
    expect(
      imports.every((i: { status: string; method: string }) => i.status === 'completed' && i.method === 'api'),
    ).toBe(true);
  });

  test('while an import holds the list, add-records is a 409 with Retry-After; the import is importing', async () => {
    const list = await newList('md5');
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let started!: (id: string) => void;
    const running = new Promise<string>((r) => (started = r));
    const job = {
      accountId: t.accountId,
      listId: list,
      method: 'manual' as const,
      estimatedSeconds: 30,
      describeFailure: () => 'test',
    };
    const holder = holdList(t.db.sql, job, async (_conn, importId) => {
      started(importId);
      await released;
    });
    const importId = await running;
    try {
      const res = await add(list, [md5('a')]);
      const body = expectProblem(res, 409, 'operation_in_progress');
      expect(body.detail).toContain(importId);
      const seconds = Number(res.headers.get('retry-after'));
      expect(seconds).toBeGreaterThanOrEqual(25);
      expect(seconds).toBeLessThanOrEqual(30);
      const imp = (await t.call('GET', `/v1/suppression-lists/${list}/imports/${importId}`)).body;
      expect(imp).toMatchObject({ status: 'importing', method: 'manual' });
      expect(imp).not.toHaveProperty('completedAt');
    } finally {
      release();
      await holder;
    }
    expect((await add(list, [md5('a')])).body).toMatchObject({ addedCount: 1 });
  });

  test('an import left importing by a process that died is marked failed by the next one', async () => {
    const list = await newList('md5');
    const [stale] = await t.db.sql<{ id: string }[]>`
      insert into suppression_imports (account_id, list_id, status, method)
      values (${t.accountId}, ${list}, 'importing', 'manual') returning id`;
    const res = await add(list, [md5('a')]);
    expect(res.status).toBe(200);
    const old = (await t.call('GET', `/v1/suppression-lists/${list}/imports/${stale!.id}`)).body;
    expect(old).toMatchObject({ status: 'failed', completedAt: expect.any(String) });
  });

  test('a failed import changes nothing and is marked failed', async () => {
    const list = await newList('md5');
    const job = {
      accountId: t.accountId,
      listId: list,
      method: 'api' as const,
      estimatedSeconds: 1,
      describeFailure: () => 'boom',
    };
    let id = '';
    const failing = holdList(t.db.sql, job, async (conn, importId) => {
      id = importId;
      await conn`begin`;
      await conn`
        insert into suppression_records (account_id, list_id, value)
        values (${t.accountId}, ${list}, ${Buffer.alloc(16)})`;
      await conn`rollback`;
      throw new Error('boom');
    });
    expect(failing).rejects.toThrow('boom');
    await failing.catch(() => {});
    const [row] = await t.db.sql<
      { status: string; failure_reason: string }[]
    >`select status, failure_reason from suppression_imports where id = ${id}`;
    expect(row).toEqual({ status: 'failed', failure_reason: 'boom' });
    expect(await stored(list)).toEqual([]);
    expect((await add(list, [md5('a')])).status).toBe(200);
  });
});

describe('GET /v1/suppression-lists/{id}/imports', () => {
  let list = '';
  const ids: string[] = [];
  beforeAll(async () => {
    list = await newList('md5');
    for (let i = 0; i < 12; i++) ids.push((await add(list, [md5(`h${i}`)])).body.importId);
    // Another list's imports never show up here.
    await add(await newList('md5'), [md5('elsewhere')]);
  });

  test('lists every import newest first with the default page size', async () => {
    const body = await history(list);
    expect(body.pagination).toEqual({ page: 1, pageSize: 200, totalCount: 12, totalPages: 1 });
    expect(body.data.map((i: { id: string }) => i.id)).toEqual([...ids].reverse());
  });

  test('pages with page and pageSize', async () => {
    const first = await history(list, '?pageSize=10');
    expect(first.pagination).toEqual({ page: 1, pageSize: 10, totalCount: 12, totalPages: 2 });
    expect(first.data).toHaveLength(10);
    const second = await history(list, '?pageSize=10&page=2');
    expect(second.data.map((i: { id: string }) => i.id)).toEqual([ids[1], ids[0]]);
    const past = await history(list, '?pageSize=10&page=3');
    expect(past).toEqual({ data: [], pagination: { page: 3, pageSize: 10, totalCount: 12, totalPages: 2 } });
  });

  test.each([
    ['pageSize=9', 'pageSize'],
    ['pageSize=201', 'pageSize'],
    ['page=0', 'page'],
    ['page=x', 'page'],
    ['sort=name', 'sort'],
    ['page=1&page=2', 'page'],
  ])('?%s is a 400 naming the parameter', async (query, parameter) => {
    const res = await t.call('GET', `/v1/suppression-lists/${list}/imports?${query}`);
    expect(expectProblem(res, 400, 'invalid_request_error').errors[0].parameter).toBe(parameter);
  });

  test('pageSize bounds 10 and 200 are accepted', async () => {
    expect((await history(list, '?pageSize=200')).pagination.pageSize).toBe(200);
    expect((await history(list, '?pageSize=10')).pagination.pageSize).toBe(10);
  });

  test('a list without imports has an empty history', async () => {
    expect(await history(await newList('sha512'))).toEqual({
      data: [],
      pagination: { page: 1, pageSize: 200, totalCount: 0, totalPages: 0 },
    });
  });

  test("an unknown list, or another account's, is a 404", async () => {
    expectProblem(await t.call('GET', `/v1/suppression-lists/${NOBODY}/imports`), 404, 'not_found_error');
    const other = await createAccount(t.db.sql, 'other');
    const theirs = await createSuppressionList(t.db.sql, other, 'theirs', 'md5');
    expectProblem(await t.call('GET', `/v1/suppression-lists/${theirs}/imports`), 404, 'not_found_error');
  });
});

describe('GET /v1/suppression-lists/{id}/imports/{importId}', () => {
  test("an import of another list is a 404, so is another account's", async () => {
    const a = await newList('md5');
    const b = await newList('md5');
    const { importId } = (await add(a, [md5('z')])).body;
    expect((await t.call('GET', `/v1/suppression-lists/${a}/imports/${importId}`)).status).toBe(200);
    expectProblem(await t.call('GET', `/v1/suppression-lists/${b}/imports/${importId}`), 404, 'not_found_error');
    expectProblem(await t.call('GET', `/v1/suppression-lists/${a}/imports/${NOBODY}`), 404, 'not_found_error');
    const other = await createAccount(t.db.sql, 'other');
    const otherKey = await createKey(t.db.sql, other);
    expectProblem(
      await t.call('GET', `/v1/suppression-lists/${a}/imports/${importId}`, { key: otherKey }),
      404,
      'not_found_error',
    );
  });

  test('a non-uuid import id is a 400 naming the parameter', async () => {
    const a = await newList('md5');
    const res = await t.call('GET', `/v1/suppression-lists/${a}/imports/12`);
    expect(expectProblem(res, 400, 'invalid_request_error').errors[0].parameter).toBe('importId');
  });
});

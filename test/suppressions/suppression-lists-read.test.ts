// GET /v1/suppression-lists and GET /v1/suppression-lists/{id} (spec: Suppression list, GET
// /v1/suppression-lists, Pagination; DESIGN: the single list returns the suppression list object).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { expectProblem, testApp, type TestApp } from '../helpers/app';
import { createAccount, createKey, createSuppressionList } from '../helpers/fixtures';

let t: TestApp;

beforeAll(async () => {
  t = await testApp();
});
afterAll(() => t.close());

async function account() {
  const id = await createAccount(t.db.sql);
  const key = await createKey(t.db.sql, id);
  const get = (path: string) => t.call('GET', path, { key });
  const ids = async (query: string): Promise<string[]> => {
    const res = await get(`/v1/suppression-lists?${query}`);
    if (res.status !== 200) throw new Error(`${query}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.map((l: { id: string }) => l.id);
  };
  return { id, key, get, ids };
}

/** Sets a list's timestamps, so that orders do not depend on insert timing. */
async function stamp(id: string, createdAt: string, updatedAt: string) {
  await t.db.sql`
      update suppression_lists set created_at = ${createdAt}::timestamptz, updated_at = ${updatedAt}::timestamptz
      where id = ${id}`;
}

describe('GET /v1/suppression-lists: sort', () => {
  let a: Awaited<ReturnType<typeof account>>;
  let A: string, B: string, C: string;
  beforeAll(async () => {
    a = await account();
    // Six distinct orders of three lists: by name A B C, by createdAt B C A, by updatedAt C A B.
    A = await createSuppressionList(t.db.sql, a.id, 'alpha', 'md5');
    B = await createSuppressionList(t.db.sql, a.id, 'Bravo', 'sha512');
    C = await createSuppressionList(t.db.sql, a.id, 'charlie', 'plain text');
    await stamp(A, '2024-01-03T00:00:00Z', '2024-02-02T00:00:00Z');
    await stamp(B, '2024-01-01T00:00:00Z', '2024-02-03T00:00:00Z');
    await stamp(C, '2024-01-02T00:00:00Z', '2024-02-01T00:00:00Z');
  });

  test('the default is by name, ignoring case', async () => {
    expect(await a.ids('')).toEqual([A, B, C]);
  });

  test('sort=name and sort=-name', async () => {
    expect(await a.ids('sort=name')).toEqual([A, B, C]);
    expect(await a.ids('sort=-name')).toEqual([C, B, A]);
  });

  test('sort=createdAt and sort=-createdAt', async () => {
    expect(await a.ids('sort=createdAt')).toEqual([B, C, A]);
    expect(await a.ids('sort=-createdAt')).toEqual([A, C, B]);
  });

  test('sort=updatedAt and sort=-updatedAt', async () => {
    expect(await a.ids('sort=updatedAt')).toEqual([C, A, B]);
    expect(await a.ids('sort=-updatedAt')).toEqual([B, A, C]);
  });

  test('equal sort keys are ordered by id, reversed with the sort', async () => {
    const b = await account();
    const same = [
      await createSuppressionList(t.db.sql, b.id, 'Same', 'md5'),
      await createSuppressionList(t.db.sql, b.id, 'same', 'md5'),
      await createSuppressionList(t.db.sql, b.id, 'Same', 'md5'),
    ];
    for (const id of same) await stamp(id, '2024-05-05T00:00:00Z', '2024-05-05T00:00:00Z');
    const byId = [...same].sort();
    for (const sort of ['name', 'createdAt', 'updatedAt']) {
      expect(await b.ids(`sort=${sort}`)).toEqual(byId);
      expect(await b.ids(`sort=-${sort}`)).toEqual([...byId].reverse());
    }
    // and pages of size 10 over the tie never overlap
    const many = await account();
    for (let i = 0; i < 15; i++) await createSuppressionList(t.db.sql, many.id, 'Tie', 'md5');
    await t.db.sql`
        update suppression_lists set created_at = '2024-01-01', updated_at = '2024-01-01'
        where account_id = ${many.id}`;
    const pages = [
      ...(await many.ids('sort=createdAt&pageSize=10')),
      ...(await many.ids('sort=createdAt&pageSize=10&page=2')),
    ];
    expect(new Set(pages).size).toBe(15);
  });

  test('any other sort is 400 naming sort', async () => {
    for (const sort of ['id', 'recordCount', 'NAME', '-', 'name,createdAt', '']) {
      const body = expectProblem(
        await a.get(`/v1/suppression-lists?sort=${encodeURIComponent(sort)}`),
        400,
        'invalid_request_error',
      );
      expect(body.errors[0].parameter).toBe('sort');
    }
  });
});

describe('GET /v1/suppression-lists: contents', () => {
  test('items are suppression list objects with every field', async () => {
    const a = await account();
    const id = await createSuppressionList(t.db.sql, a.id, 'Global list', 'plain text', { isGlobal: true });
    await t.db.sql`update suppression_lists set record_count = 42 where id = ${id}`;
    await stamp(id, '2024-03-04T05:06:07.089Z', '2024-04-05T06:07:08.091Z');
    const res = await a.get('/v1/suppression-lists');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [
        {
          id,
          name: 'Global list',
          format: 'plain text',
          isGlobal: true,
          recordCount: 42,
          createdAt: '2024-03-04T05:06:07.089Z',
          updatedAt: '2024-04-05T06:07:08.091Z',
        },
      ],
      pagination: { page: 1, pageSize: 200, totalCount: 1, totalPages: 1 },
    });
  });

  test('lists attached to an offer are not listed, nor counted', async () => {
    const a = await account();
    const kept = await createSuppressionList(t.db.sql, a.id, 'b plain', 'md5');
    await createSuppressionList(t.db.sql, a.id, 'a offer list', 'md5', { offerId: 'offer-1' });
    await createSuppressionList(t.db.sql, a.id, 'c offer list', 'sha512', { offerId: 'offer-2', isGlobal: true });
    const res = await a.get('/v1/suppression-lists?pageSize=10');
    expect(res.body.data.map((l: { id: string }) => l.id)).toEqual([kept]);
    expect(res.body.pagination).toEqual({ page: 1, pageSize: 10, totalCount: 1, totalPages: 1 });
    for (const sort of ['-name', 'createdAt', '-updatedAt']) expect(await a.ids(`sort=${sort}`)).toEqual([kept]);
  });

  test("another account's lists are not listed", async () => {
    const a = await account();
    const b = await account();
    const mine = await createSuppressionList(t.db.sql, a.id, 'mine', 'md5');
    await createSuppressionList(t.db.sql, b.id, 'theirs', 'md5');
    expect(await a.ids('')).toEqual([mine]);
  });
});

describe('GET /v1/suppression-lists: pagination', () => {
  let a: Awaited<ReturnType<typeof account>>;
  let all: string[];
  beforeAll(async () => {
    a = await account();
    for (let i = 0; i < 23; i++)
      await createSuppressionList(t.db.sql, a.id, `List ${String(i).padStart(2, '0')}`, 'md5');
    all = await a.ids('');
  });

  test('defaults are page 1 and pageSize 200', async () => {
    const res = await a.get('/v1/suppression-lists');
    expect(res.body.pagination).toEqual({ page: 1, pageSize: 200, totalCount: 23, totalPages: 1 });
    expect(res.body.data).toHaveLength(23);
  });

  test('pages split the lists', async () => {
    const p3 = await a.get('/v1/suppression-lists?pageSize=10&page=3');
    expect(p3.body.data.map((l: { id: string }) => l.id)).toEqual(all.slice(20));
    expect(p3.body.pagination).toEqual({ page: 3, pageSize: 10, totalCount: 23, totalPages: 3 });
  });

  test('a page past the end is empty with the full counts', async () => {
    const res = await a.get('/v1/suppression-lists?pageSize=10&page=9');
    expect(res.body).toEqual({ data: [], pagination: { page: 9, pageSize: 10, totalCount: 23, totalPages: 3 } });
  });

  test('totalPages is 0 when the account has no lists', async () => {
    const empty = await account();
    const res = await empty.get('/v1/suppression-lists');
    expect(res.body).toEqual({ data: [], pagination: { page: 1, pageSize: 200, totalCount: 0, totalPages: 0 } });
  });

  test('pageSize 10 and 200 are accepted; 9 and 201 are 400 naming pageSize', async () => {
    expect((await a.get('/v1/suppression-lists?pageSize=10')).body.data).toHaveLength(10);
    expect((await a.get('/v1/suppression-lists?pageSize=200')).status).toBe(200);
    for (const size of ['9', '201', 'ten']) {
      const body = expectProblem(await a.get(`/v1/suppression-lists?pageSize=${size}`), 400, 'invalid_request_error');
      expect(body.errors).toEqual([{ detail: expect.any(String), parameter: 'pageSize' }]);
    }
  });

  test('page 0 and page=abc are 400 naming page', async () => {
    for (const page of ['0', 'abc', '-2']) {
      const body = expectProblem(await a.get(`/v1/suppression-lists?page=${page}`), 400, 'invalid_request_error');
      expect(body.errors).toEqual([{ detail: expect.any(String), parameter: 'page' }]);
    }
  });

  test('an unknown query parameter is 400 naming it', async () => {
    const body = expectProblem(await a.get('/v1/suppression-lists?format=md5'), 400, 'invalid_request_error');
    expect(body.errors).toEqual([{ detail: expect.any(String), parameter: 'format' }]);
  });
});

describe('GET /v1/suppression-lists/{suppressionListId}', () => {
  test('returns the suppression list object', async () => {
    const a = await account();
    const id = await createSuppressionList(t.db.sql, a.id, 'Hashes', 'sha512');
    await t.db.sql`update suppression_lists set record_count = 7 where id = ${id}`;
    await stamp(id, '2023-12-31T23:59:59.999Z', '2024-01-01T00:00:00.000Z');
    const res = await a.get(`/v1/suppression-lists/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id,
      name: 'Hashes',
      format: 'sha512',
      isGlobal: false,
      recordCount: 7,
      createdAt: '2023-12-31T23:59:59.999Z',
      updatedAt: '2024-01-01T00:00:00.000Z',
    });
  });

  test('isGlobal reflects the list', async () => {
    const a = await account();
    const id = await createSuppressionList(t.db.sql, a.id, 'Everywhere', 'md5', { isGlobal: true });
    expect((await a.get(`/v1/suppression-lists/${id}`)).body.isGlobal).toBe(true);
  });

  test('a non-UUID id is 400 naming suppressionListId', async () => {
    const a = await account();
    const id = await createSuppressionList(t.db.sql, a.id, 'x', 'md5');
    for (const bad of ['42', 'list', `${id}x`, `urn:uuid:${id}`]) {
      const body = expectProblem(
        await a.get(`/v1/suppression-lists/${encodeURIComponent(bad)}`),
        400,
        'invalid_request_error',
      );
      expect(body.errors).toEqual([{ detail: expect.any(String), parameter: 'suppressionListId' }]);
    }
  });

  test('an unknown id is 404 not_found_error', async () => {
    const a = await account();
    expectProblem(await a.get(`/v1/suppression-lists/${crypto.randomUUID()}`), 404, 'not_found_error');
  });

  test("another account's list is 404", async () => {
    const a = await account();
    const b = await account();
    const theirs = await createSuppressionList(t.db.sql, b.id, 'theirs', 'md5');
    expectProblem(await a.get(`/v1/suppression-lists/${theirs}`), 404, 'not_found_error');
  });
});

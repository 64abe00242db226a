// GET /v1/brands and GET /v1/brands/{brandId} (spec: Brand, GET /v1/brands, GET /v1/brands/{id}, Pagination).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Sql } from '../../src/db';
import { expectProblem, testApp, type TestApp } from '../helpers/app';
import { createAccount, createBrand, createKey } from '../helpers/fixtures';

let t: TestApp;

beforeAll(async () => {
  t = await testApp();
});
afterAll(() => t.close());

/** A fresh account with its own key, so each group of tests sees only its own brands. */
async function account(brands: Array<string | { name: string; enabled?: boolean }> = []) {
  const id = await createAccount(t.db.sql);
  const key = await createKey(t.db.sql, id);
  const ids = new Map<string, string>();
  for (const b of brands) {
    const spec = typeof b === 'string' ? { name: b } : b;
    ids.set(spec.name, await createBrand(t.db.sql, id, spec.name, { enabled: spec.enabled ?? true }));
  }
  const get = (path: string) => t.call('GET', path, { key });
  /** Names returned by GET /v1/brands with the given query string. */
  const names = async (query: string) => {
    const res = await get(`/v1/brands?${query}`);
    if (res.status !== 200) throw new Error(`${query}: ${res.status} ${JSON.stringify(res.body)}`);
    return (res.body.data as { name: string }[]).map((b) => b.name);
  };
  return { id, key, ids, get, names };
}

const q = (param: string, value: string) => `${param}=${encodeURIComponent(value)}`;
const sorted = (names: string[]) => [...names].sort();

describe('GET /v1/brands: name operators', () => {
  let a: Awaited<ReturnType<typeof account>>;
  beforeAll(async () => {
    a = await account(['Acme Mail', 'acme news', 'Beta ACME', 'Gamma']);
  });

  test('equal matches the whole name, ignoring case', async () => {
    expect(await a.names(q('name[equal]', 'ACME MAIL'))).toEqual(['Acme Mail']);
    expect(await a.names(q('name[equal]', 'acme mail'))).toEqual(['Acme Mail']);
    expect(await a.names(q('name[equal]', 'Acme'))).toEqual([]);
    expect(await a.names(q('name[equal]', 'Acme Mail '))).toEqual([]);
  });

  test('not_equal excludes the whole name, ignoring case', async () => {
    expect(sorted(await a.names(q('name[not_equal]', 'ACME mail')))).toEqual(['Beta ACME', 'Gamma', 'acme news']);
    expect(await a.names(q('name[not_equal]', 'Acme'))).toHaveLength(4);
  });

  test('starts_with ignores case', async () => {
    expect(sorted(await a.names(q('name[starts_with]', 'ACME')))).toEqual(['Acme Mail', 'acme news']);
    expect(await a.names(q('name[starts_with]', 'Mail'))).toEqual([]);
    expect(await a.names(q('name[starts_with]', 'beta acme'))).toEqual(['Beta ACME']);
  });

  test('ends_with ignores case', async () => {
    expect(await a.names(q('name[ends_with]', 'acme'))).toEqual(['Beta ACME']);
    expect(await a.names(q('name[ends_with]', 'NEWS'))).toEqual(['acme news']);
    expect(await a.names(q('name[ends_with]', 'Acm'))).toEqual([]);
    expect(await a.names(q('name[ends_with]', 'a longer value than any brand name'))).toEqual([]);
  });

  test('contains ignores case', async () => {
    expect(sorted(await a.names(q('name[contains]', 'CME')))).toEqual(['Acme Mail', 'Beta ACME', 'acme news']);
    expect(await a.names(q('name[contains]', 'e n'))).toEqual(['acme news']);
    expect(await a.names(q('name[contains]', 'zzz'))).toEqual([]);
  });

  test('starts_with_case_sensitive respects case', async () => {
    expect(await a.names(q('name[starts_with_case_sensitive]', 'Acme'))).toEqual(['Acme Mail']);
    expect(await a.names(q('name[starts_with_case_sensitive]', 'acme'))).toEqual(['acme news']);
    expect(await a.names(q('name[starts_with_case_sensitive]', 'ACME'))).toEqual([]);
  });

  test('ends_with_case_sensitive respects case', async () => {
    expect(await a.names(q('name[ends_with_case_sensitive]', 'ACME'))).toEqual(['Beta ACME']);
    expect(await a.names(q('name[ends_with_case_sensitive]', 'acme'))).toEqual([]);
    expect(await a.names(q('name[ends_with_case_sensitive]', 'Mail'))).toEqual(['Acme Mail']);
    expect(await a.names(q('name[ends_with_case_sensitive]', 'mail'))).toEqual([]);
  });

  test('contains_case_sensitive respects case', async () => {
    expect(sorted(await a.names(q('name[contains_case_sensitive]', 'cme')))).toEqual(['Acme Mail', 'acme news']);
    expect(await a.names(q('name[contains_case_sensitive]', 'CME'))).toEqual(['Beta ACME']);
    expect(await a.names(q('name[contains_case_sensitive]', 'MAIL'))).toEqual([]);
  });

  test('plain name= is name[equal]', async () => {
    expect(await a.names(q('name', 'ACME MAIL'))).toEqual(['Acme Mail']);
    expect(await a.names(q('name', 'Acme'))).toEqual([]);
    expect(await a.names(q('name', 'gamma'))).toEqual(await a.names(q('name[equal]', 'gamma')));
  });

  test('an operator written with escaped brackets is the same operator', async () => {
    expect(await a.names('name%5Bcontains%5D=news')).toEqual(['acme news']);
  });

  test('a filter combines with enabled and with paging', async () => {
    const b = await account(['Acme One', { name: 'Acme Two', enabled: false }, 'Other']);
    expect(await b.names(`${q('name[starts_with]', 'acme')}&enabled=false`)).toEqual(['Acme Two']);
    const res = await b.get(`/v1/brands?${q('name[starts_with]', 'acme')}&pageSize=10`);
    expect(res.body.pagination).toEqual({ page: 1, pageSize: 10, totalCount: 2, totalPages: 1 });
  });
});

describe('GET /v1/brands: values are matched literally', () => {
  let a: Awaited<ReturnType<typeof account>>;
  beforeAll(async () => {
    a = await account([
      '100% Deals',
      '100X Deals', // %
      'a_b',
      'axb', // _
      'back\\slash',
      'backslash', // \
      'x.*y',
      'xzzy', // .*
      '[a]',
      'a', // [a]
      '^caret',
      'caret', // ^
      'dollar$',
      'dollar', // $
      'a,b',
      'a+b',
      'a b', // query-string characters
    ]);
  });

  test('% matches itself only', async () => {
    expect(await a.names(q('name[contains]', '%'))).toEqual(['100% Deals']);
    expect(await a.names(q('name[starts_with]', '100%'))).toEqual(['100% Deals']);
    expect(await a.names(q('name[equal]', '100% deals'))).toEqual(['100% Deals']);
    expect(await a.names(q('name[equal]', '%'))).toEqual([]);
  });

  test('_ matches itself only', async () => {
    expect(await a.names(q('name[contains]', '_'))).toEqual(['a_b']);
    expect(await a.names(q('name[equal]', 'a_b'))).toEqual(['a_b']);
    expect(await a.names(q('name[ends_with_case_sensitive]', '_b'))).toEqual(['a_b']);
  });

  test('\\ matches itself only', async () => {
    expect(await a.names(q('name[contains]', '\\'))).toEqual(['back\\slash']);
    expect(await a.names(q('name[equal]', 'back\\slash'))).toEqual(['back\\slash']);
    expect(await a.names(q('name[starts_with]', 'back\\'))).toEqual(['back\\slash']);
    expect(await a.names(q('name[equal]', 'back\\\\slash'))).toEqual([]);
  });

  test('.* matches itself only', async () => {
    expect(await a.names(q('name[contains]', '.*'))).toEqual(['x.*y']);
    expect(await a.names(q('name[equal]', '.*'))).toEqual([]);
    expect(await a.names(q('name[equal]', 'x.*y'))).toEqual(['x.*y']);
    expect(await a.names(q('name[starts_with]', 'x.'))).toEqual(['x.*y']);
  });

  test('[a] matches itself only', async () => {
    expect(await a.names(q('name[equal]', '[a]'))).toEqual(['[a]']);
    expect(await a.names(q('name[contains_case_sensitive]', '[a]'))).toEqual(['[a]']);
    expect(await a.names(q('name', '[a]'))).toEqual(['[a]']);
  });

  test('^ and $ match themselves only', async () => {
    expect(await a.names(q('name[starts_with]', '^'))).toEqual(['^caret']);
    expect(await a.names(q('name[starts_with]', '^car'))).toEqual(['^caret']);
    expect(await a.names(q('name[equal]', '^caret'))).toEqual(['^caret']);
    expect(await a.names(q('name[ends_with]', '$'))).toEqual(['dollar$']);
    expect(await a.names(q('name[ends_with]', 'dollar$'))).toEqual(['dollar$']);
    expect(await a.names(q('name[contains]', 'r$'))).toEqual(['dollar$']);
    expect(await a.names(q('name[equal]', '^caret$'))).toEqual([]);
  });

  test('commas, plus signs and spaces in a value are part of it', async () => {
    expect(await a.names(q('name', 'a,b'))).toEqual(['a,b']);
    expect(await a.names(q('name', 'a+b'))).toEqual(['a+b']);
    expect(await a.names(q('name', 'a b'))).toEqual(['a b']);
    expect(await a.names('name=a+b')).toEqual(['a b']); // form encoding: + is a space
  });

  test('a NUL character in a filter is 400, not a 500', async () => {
    const body = expectProblem(await a.get('/v1/brands?name[contains]=%00'), 400, 'invalid_request_error');
    expect(body.errors[0].parameter).toBe('name[contains]');
  });
});

describe('GET /v1/brands: filter validation', () => {
  let a: Awaited<ReturnType<typeof account>>;
  beforeAll(async () => {
    a = await account(['One']);
  });

  test('more than one name filter is 400', async () => {
    for (const query of [
      'name=One&name[contains]=O',
      'name[contains]=O&name[starts_with]=O',
      'name[equal]=One&name[not_equal]=Two',
      'name=One&name=Two',
      'name[equal]=One&name[equal]=One',
    ]) {
      const body = expectProblem(await a.get(`/v1/brands?${query}`), 400, 'invalid_request_error');
      expect(body.errors[0].parameter).toMatch(/^name/);
    }
  });

  test('an unknown operator is 400 naming the parameter', async () => {
    for (const op of ['regex', 'like', 'EQUAL', 'contains ', '']) {
      const param = `name[${op}]`;
      const body = expectProblem(
        await a.get(`/v1/brands?${encodeURIComponent(param)}=x`),
        400,
        'invalid_request_error',
      );
      expect(body.errors).toEqual([{ detail: expect.any(String), parameter: param }]);
    }
  });

  test('a malformed bracket parameter is 400 naming it', async () => {
    const body = expectProblem(await a.get('/v1/brands?name[equal=x'), 400, 'invalid_request_error');
    expect(body.errors[0].parameter).toBe('name[equal');
  });

  test('an unknown query parameter is 400 naming it', async () => {
    for (const param of ['filter', 'Name', 'page_size', 'names']) {
      const body = expectProblem(await a.get(`/v1/brands?${param}=1`), 400, 'invalid_request_error');
      expect(body.errors).toEqual([{ detail: expect.any(String), parameter: param }]);
    }
  });

  test('a repeated parameter is 400 rather than one value silently winning', async () => {
    const body = expectProblem(await a.get('/v1/brands?enabled=true&enabled=false'), 400, 'invalid_request_error');
    expect(body.errors[0].parameter).toBe('enabled');
  });
});

describe('GET /v1/brands: sort', () => {
  let a: Awaited<ReturnType<typeof account>>;
  beforeAll(async () => {
    a = await account(['beta', 'Alpha', 'gamma', 'Delta', 'alphabet']);
  });

  test('the default order is by name, ignoring case', async () => {
    expect(await a.names('')).toEqual(['Alpha', 'alphabet', 'beta', 'Delta', 'gamma']);
  });

  test('sort=name is ascending and sort=-name descending', async () => {
    expect(await a.names('sort=name')).toEqual(['Alpha', 'alphabet', 'beta', 'Delta', 'gamma']);
    expect(await a.names('sort=-name')).toEqual(['gamma', 'Delta', 'beta', 'alphabet', 'Alpha']);
  });

  test('any other sort is 400 naming sort', async () => {
    for (const sort of ['id', 'createdAt', 'NAME', '+name', 'name,-name', '']) {
      const body = expectProblem(await a.get(`/v1/brands?${q('sort', sort)}`), 400, 'invalid_request_error');
      expect(body.errors[0].parameter).toBe('sort');
    }
  });

  // Two live brands cannot share a name ignoring case (brands_live_name_ci), so equal sort keys come
  // only from the id tie-break's point of view: pages must never overlap nor skip, in either order.
  test('paging through either order is stable: disjoint pages that cover every brand once', async () => {
    const names = Array.from({ length: 25 }, (_, i) => `${i % 2 ? 'Item' : 'item'} ${String(i).padStart(2, '0')}`);
    const b = await account(names);
    for (const sort of ['name', '-name']) {
      const seen: string[] = [];
      for (let page = 1; page <= 3; page++) seen.push(...(await b.names(`sort=${sort}&pageSize=10&page=${page}`)));
      expect(seen).toHaveLength(25);
      expect(new Set(seen).size).toBe(25);
      expect(seen).toEqual(await b.names(`sort=${sort}`));
    }
  });

  test('a second live brand with the same name ignoring case is refused by the database', async () => {
    const b = await account(['Unique']);
    await expect(createBrand(t.db.sql, b.id, 'UNIQUE')).rejects.toThrow();
    // a deleted brand frees its name
    await t.db.sql`update brands set deleted_at = now() where account_id = ${b.id}`;
    await createBrand(t.db.sql, b.id, 'UNIQUE');
    expect(await b.names('')).toEqual(['UNIQUE']);
  });
});

describe('GET /v1/brands: enabled', () => {
  let a: Awaited<ReturnType<typeof account>>;
  beforeAll(async () => {
    a = await account(['On 1', { name: 'Off 1', enabled: false }, 'On 2', { name: 'Off 2', enabled: false }]);
  });

  test('enabled=true returns only enabled brands', async () => {
    expect(await a.names('enabled=true')).toEqual(['On 1', 'On 2']);
  });

  test('enabled=false returns only disabled brands', async () => {
    expect(await a.names('enabled=false')).toEqual(['Off 1', 'Off 2']);
  });

  test('without enabled, disabled brands are included', async () => {
    const res = await a.get('/v1/brands');
    expect(res.body.data).toEqual([
      { id: a.ids.get('Off 1'), name: 'Off 1', enabled: false },
      { id: a.ids.get('Off 2'), name: 'Off 2', enabled: false },
      { id: a.ids.get('On 1'), name: 'On 1', enabled: true },
      { id: a.ids.get('On 2'), name: 'On 2', enabled: true },
    ]);
  });

  test('enabled=maybe is 400 naming enabled', async () => {
    for (const value of ['maybe', 'yes', '1', '']) {
      const body = expectProblem(await a.get(`/v1/brands?enabled=${value}`), 400, 'invalid_request_error');
      expect(body.errors[0].parameter).toBe('enabled');
    }
  });
});

describe('GET /v1/brands: pagination', () => {
  let a: Awaited<ReturnType<typeof account>>;
  const names = Array.from({ length: 25 }, (_, i) => `Brand ${String(i).padStart(2, '0')}`);
  beforeAll(async () => {
    a = await account(names);
  });

  test('defaults are page 1 and pageSize 200', async () => {
    const res = await a.get('/v1/brands');
    expect(res.status).toBe(200);
    expect(res.body.pagination).toEqual({ page: 1, pageSize: 200, totalCount: 25, totalPages: 1 });
    expect(res.body.data).toHaveLength(25);
  });

  test('list items carry only id, name and enabled', async () => {
    const res = await a.get('/v1/brands?pageSize=10');
    for (const item of res.body.data) expect(Object.keys(item).sort()).toEqual(['enabled', 'id', 'name']);
  });

  test('pages split the matches with totalCount and totalPages', async () => {
    const p1 = await a.get('/v1/brands?pageSize=10');
    expect(p1.body.data.map((b: { name: string }) => b.name)).toEqual(names.slice(0, 10));
    expect(p1.body.pagination).toEqual({ page: 1, pageSize: 10, totalCount: 25, totalPages: 3 });
    const p3 = await a.get('/v1/brands?pageSize=10&page=3');
    expect(p3.body.data.map((b: { name: string }) => b.name)).toEqual(names.slice(20));
    expect(p3.body.pagination).toEqual({ page: 3, pageSize: 10, totalCount: 25, totalPages: 3 });
  });

  test('a page past the end is empty, with the full totalCount and totalPages', async () => {
    for (const page of [4, 1000]) {
      const res = await a.get(`/v1/brands?pageSize=10&page=${page}`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ data: [], pagination: { page, pageSize: 10, totalCount: 25, totalPages: 3 } });
    }
  });

  test('the largest page accepted is still an empty page, not a database error', async () => {
    const res = await a.get(`/v1/brands?pageSize=200&page=${Number.MAX_SAFE_INTEGER}`);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([]);
    expect(res.body.pagination.totalCount).toBe(25);
  });

  test('totalPages is 0 when nothing matches', async () => {
    const res = await a.get('/v1/brands?name=nothing');
    expect(res.body).toEqual({ data: [], pagination: { page: 1, pageSize: 200, totalCount: 0, totalPages: 0 } });
    const past = await a.get('/v1/brands?name=nothing&page=2&pageSize=10');
    expect(past.body).toEqual({ data: [], pagination: { page: 2, pageSize: 10, totalCount: 0, totalPages: 0 } });
  });

  test('pageSize 10 and 200 are accepted', async () => {
    expect((await a.get('/v1/brands?pageSize=10')).body.data).toHaveLength(10);
    expect((await a.get('/v1/brands?pageSize=200')).body.pagination.pageSize).toBe(200);
  });

  test('pageSize 9 and 201 are 400 naming pageSize', async () => {
    for (const size of ['9', '201', '0', '-10', 'abc', '10.5', '']) {
      const body = expectProblem(await a.get(`/v1/brands?pageSize=${size}`), 400, 'invalid_request_error');
      expect(body.errors).toEqual([{ detail: expect.any(String), parameter: 'pageSize' }]);
    }
  });

  test('page 0, negative, fractional, non-numeric or beyond 2^53 is 400 naming page', async () => {
    for (const page of ['0', '-1', '1.5', 'abc', '', '1e20', '9007199254740993']) {
      const body = expectProblem(await a.get(`/v1/brands?page=${page}`), 400, 'invalid_request_error');
      expect(body.errors).toEqual([{ detail: expect.any(String), parameter: 'page' }]);
    }
  });
});

describe('GET /v1/brands: deleted brands', () => {
  test('deleted brands are excluded from the data, the count and every filter', async () => {
    const a = await account(['Kept', 'Gone', 'Gone too']);
    await t.db.sql`update brands set deleted_at = now() where account_id = ${a.id} and name like 'Gone%'`;
    const res = await a.get('/v1/brands');
    expect(res.body.data.map((b: { name: string }) => b.name)).toEqual(['Kept']);
    expect(res.body.pagination.totalCount).toBe(1);
    expect(await a.names(q('name', 'Gone'))).toEqual([]);
    expect(await a.names(q('name[not_equal]', 'Kept'))).toEqual([]);
    expect(await a.names('enabled=true')).toEqual(['Kept']);
    const past = await a.get('/v1/brands?page=2&pageSize=10');
    expect(past.body.pagination.totalCount).toBe(1);
  });
});

async function insertFullBrand(sql: Sql, accountId: string) {
  const [row] = await sql<{ id: string; created_at: Date }[]>`
    insert into brands (account_id, name, enabled, from_address, domain, esps, verticals, unsubscribe_page_id,
                        use_list_unsubscribe_header)
    values (
      ${accountId}, 'Full brand', false, 'news@full.example', 'mail.full.example',
      ${sql.json([
        { id: '7d1c4a9e-3b2f-4c1a-9e8d-5f6a7b8c9d0e', name: 'Sendgrid' },
        { id: '0b9e2d7c-1a3f-4e5d-8c9b-a1b2c3d4e5f6', name: 'Postmark' },
      ])},
      ${sql.json([
        { id: 12, label: 'Finance' },
        { id: 7, label: 'Travel' },
      ])},
      '3f2504e0-4f89-41d3-9a0c-0305e82c3301', true
    )
    returning id, created_at`;
  return row!;
}

describe('GET /v1/brands/{brandId}', () => {
  let a: Awaited<ReturnType<typeof account>>;
  beforeAll(async () => {
    a = await account(['Plain']);
  });

  test('a brand with nothing optional set omits fromAddress, domain and unsubscribePageId', async () => {
    const id = a.ids.get('Plain')!;
    const [row] = await t.db.sql<{ created_at: Date }[]>`select created_at from brands where id = ${id}`;
    const res = await a.get(`/v1/brands/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id,
      name: 'Plain',
      enabled: true,
      esps: [],
      verticals: [],
      unsubscribeHandling: { type: 'Hosted', useListUnsubscribeHeader: false },
      createdAt: row!.created_at.toISOString(),
    });
  });

  test('a brand with every field set returns them all', async () => {
    const { id, created_at } = await insertFullBrand(t.db.sql, a.id);
    const res = await a.get(`/v1/brands/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id,
      name: 'Full brand',
      enabled: false,
      fromAddress: 'news@full.example',
      domain: 'mail.full.example',
      esps: [
        { id: '7d1c4a9e-3b2f-4c1a-9e8d-5f6a7b8c9d0e', name: 'Sendgrid' },
        { id: '0b9e2d7c-1a3f-4e5d-8c9b-a1b2c3d4e5f6', name: 'Postmark' },
      ],
      verticals: [
        { id: 12, label: 'Finance' },
        { id: 7, label: 'Travel' },
      ],
      unsubscribeHandling: {
        type: 'Hosted',
        useListUnsubscribeHeader: true,
        unsubscribePageId: '3f2504e0-4f89-41d3-9a0c-0305e82c3301',
      },
      createdAt: created_at.toISOString(),
    });
    expect(res.body.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  test('only fromAddress set: domain and unsubscribePageId stay omitted', async () => {
    const id = await createBrand(t.db.sql, a.id, 'From only', { fromAddress: 'a@b.example' });
    const res = await a.get(`/v1/brands/${id}`);
    expect(res.body.fromAddress).toBe('a@b.example');
    expect('domain' in res.body).toBe(false);
    expect('unsubscribePageId' in res.body.unsubscribeHandling).toBe(false);
  });

  test('the id is matched in any letter case', async () => {
    const id = a.ids.get('Plain')!;
    const res = await a.get(`/v1/brands/${id.toUpperCase()}`);
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(id);
  });

  test('a non-UUID id is 400 naming brandId', async () => {
    for (const bad of [
      '123',
      'not-a-uuid',
      `${a.ids.get('Plain')}0`,
      `urn:uuid:${a.ids.get('Plain')}`,
      `{${a.ids.get('Plain')}}`,
    ]) {
      const body = expectProblem(await a.get(`/v1/brands/${encodeURIComponent(bad)}`), 400, 'invalid_request_error');
      expect(body.errors).toEqual([{ detail: expect.any(String), parameter: 'brandId' }]);
    }
  });

  test('an unknown id is 404 not_found_error', async () => {
    expectProblem(await a.get(`/v1/brands/${crypto.randomUUID()}`), 404, 'not_found_error');
  });

  test("another account's brand is 404", async () => {
    const other = await account(['Theirs']);
    expectProblem(await a.get(`/v1/brands/${other.ids.get('Theirs')}`), 404, 'not_found_error');
    expect((await other.get(`/v1/brands/${other.ids.get('Theirs')}`)).status).toBe(200);
  });

  test('a deleted brand is 404', async () => {
    const id = await createBrand(t.db.sql, a.id, 'Soon deleted');
    expect((await a.get(`/v1/brands/${id}`)).status).toBe(200);
    await t.db.sql`update brands set deleted_at = now() where id = ${id}`;
    expectProblem(await a.get(`/v1/brands/${id}`), 404, 'not_found_error');
  });
});

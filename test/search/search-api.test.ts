/**
 * POST /v1/contact-searches, POST /v1/contact-counts and GET /v1/contact-stats over HTTP (issue 56;
 * docs/searching.md), apart from what the property test (search-property.test.ts) compares:
 * - every rule of the filter language is a 400 invalid_request_error in the RFC 9457 envelope, with
 *   the pointer docs/searching.md's error table gives, on both routes that take a filter; the body's
 *   own fields (pageSize, cursor, unknown fields) likewise;
 * - the scope: a key without contacts:read is 403 on the three routes;
 * - a cursor continues the same filter however its keys are ordered and its attribute names cased;
 * - a search or count past SEARCH_TIMEOUT_MS is a 504 problem, and its statement is gone from the
 *   database after;
 * - POST /v1/contact-exports with a filter of the language exports exactly the search's contacts and
 *   shows the filter as sent; a bad one is the search's 400 under /filter; the shorthand still works.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import Papa from 'papaparse';
import { connect } from '../../src/db';
import { setLogLevel } from '../../src/log';
import { runNextExport } from '../../worker/exports/loop';
import { expectProblem, testApp, type Call, type TestApp } from '../helpers/app';
import { createAccount, createAttribute, createBrand, createKey } from '../helpers/fixtures';
import { tempStore } from '../helpers/file-store';

let t: TestApp;
let files: Awaited<ReturnType<typeof tempStore>>;
let brand: string;
let otherBrand: string;
let deletedBrand: string;

/** Six contacts of the account, two of them on `brand`, one disabled. */
const CONTACTS = [
  { email: 'ann@example.com', attributes: { tier: 'gold', age: 31, vip: true, work: 'Ann@Work.example', tags: ['a'] } },
  { email: 'Bob@Gmail.com', attributes: { tier: 'silver', age: 25, vip: false, tags: ['a', 'b'] } },
  { email: 'cy@gmail.com', attributes: { tier: 'gold', age: 40 } },
  { email: 'dee@example.org', attributes: { tier: 'Gold', vip: true, work: 'dee@work.example' } },
  { email: 'eve@x.io', attributes: { age: 31 } },
  { email: 'fay@x.io', attributes: {} },
];

beforeAll(async () => {
  setLogLevel('warn');
  files = await tempStore();
  t = await testApp({ storage: files.store } as never);
  const sql = t.db.sql;
  for (const [name, type] of [
    ['tier', 'string'],
    ['age', 'number'],
    ['vip', 'boolean'],
    ['work', 'email'],
    ['tags', 'array'],
  ] as const)
    await createAttribute(sql, t.accountId, name, type);
  brand = await createBrand(sql, t.accountId, 'main');
  deletedBrand = await createBrand(sql, t.accountId, 'gone');
  const other = await createAccount(sql, 'other');
  otherBrand = await createBrand(sql, other, 'theirs');
  for (const [i, c] of CONTACTS.entries()) {
    const res = await t.call('POST', '/v1/contacts', {
      body: { ...c, brandIds: i < 2 ? [brand] : i === 2 ? [deletedBrand] : [] },
    });
    expect(res.status).toBe(201);
    if (c.email === 'eve@x.io')
      expect((await t.call('POST', `/v1/contacts/${res.body.emailMd5}/disable`)).status).toBe(200);
  }
  await sql`update brands set deleted_at = now() where account_id = ${t.accountId} and id = ${deletedBrand}`;
});
afterAll(async () => {
  await t?.close();
  await files?.remove();
});

const search = (body: unknown, key?: string) => t.call('POST', '/v1/contact-searches', { body, key });
const count = (body: unknown, key?: string) => t.call('POST', '/v1/contact-counts', { body, key });

function pointerOf(res: Call): string {
  const body = expectProblem(res, 400, 'invalid_request_error');
  expect(body.errors).toBeArray();
  return body.errors[0].pointer;
}

/** The pointer of `filter`'s 400, the same on a search and on a count. */
async function filterPointer(filter: unknown): Promise<string> {
  const searched = pointerOf(await search({ filter }));
  expect(pointerOf(await count({ filter }))).toBe(searched);
  return searched;
}

const tierIs = (value: string) => ({ attribute: 'tier', op: 'eq', value });
/** `leaf` as the third entry of an `and`, at /filter/and/2, as docs/searching.md's table names it. */
const third = (leaf: unknown) => ({ and: [tierIs('gold'), { enabled: true }, leaf] });
const leafs = (n: number) => Array.from({ length: n }, (_, i) => tierIs(`t${i}`));

describe('filter validation: 400 invalid_request_error at the node at fault', () => {
  test('an attribute the schema does not have: /attribute', async () => {
    expect(await filterPointer(third({ attribute: 'nope', op: 'eq', value: 'x' }))).toBe('/filter/and/2/attribute');
    expect(await filterPointer(third({ attribute: 'tier:domain', op: 'eq', value: 'x' }))).toBe(
      '/filter/and/2/attribute',
    );
    expect(await filterPointer(third({ attribute: 'work:md6', op: 'eq', value: 'x' }))).toBe('/filter/and/2/attribute');
    expect(await filterPointer(third({ attribute: 5, op: 'eq', value: 'x' }))).toBe('/filter/and/2/attribute');
    expect(await filterPointer(third({ op: 'eq', value: 'x' }))).toBe('/filter/and/2/attribute');
  });

  const wrongOps: [string, string][] = [
    ['tier', 'gt'],
    ['tier', 'domain'],
    ['tier', 'contains'],
    ['age', 'prefix'],
    ['age', 'contains'],
    ['vip', 'ne'],
    ['vip', 'in'],
    ['work', 'ne'],
    ['work', 'prefix'],
    ['Email', 'ne'],
    ['Email', 'gt'],
    ['tags', 'eq'],
    ['tags', 'in'],
    ['Brand', 'eq'],
    ['Brand', 'in'],
    ['work:domain', 'domain'],
    ['work:md5', 'gt'],
    ['tier', 'EQ'],
    ['tier', 'like'],
  ];
  test.each(wrongOps)('%s takes no operator %s: /op', async (attribute, op) => {
    expect(await filterPointer(third({ attribute, op, value: 'x' }))).toBe('/filter/and/2/op');
  });
  test('no operator, or not a string: /op', async () => {
    expect(await filterPointer(third({ attribute: 'tier', value: 'x' }))).toBe('/filter/and/2/op');
    expect(await filterPointer(third({ attribute: 'tier', op: 1, value: 'x' }))).toBe('/filter/and/2/op');
  });

  const wrongValues: [string, string, unknown][] = [
    ['tier', 'eq', 5],
    ['tier', 'eq', ''],
    ['tier', 'eq', 'x'.repeat(256)],
    ['tier', 'eq', ['gold']],
    ['tier', 'ne', null],
    ['tier', 'prefix', ''],
    ['tier', 'prefix', 'x'.repeat(256)],
    ['tier', 'in', 'gold'],
    ['tier', 'in', []],
    ['tier', 'in', Array.from({ length: 101 }, (_, i) => `v${i}`)],
    ['age', 'eq', '30'],
    ['age', 'gt', true],
    ['age', 'in', 30],
    ['vip', 'eq', 'true'],
    ['vip', 'eq', 1],
    ['work', 'eq', 5],
    ['work', 'domain', 5],
    ['work', 'in', []],
    ['Email', 'eq', 5],
    ['Email', 'in', 'ann@example.com'],
    ['tags', 'contains', ['a']],
    ['tags', 'contains', 5],
    ['tags', 'containsAny', []],
    ['tags', 'containsAny', 'a'],
    ['tags', 'containsAny', Array.from({ length: 101 }, (_, i) => `v${i}`)],
    ['work:domain', 'eq', 5],
    ['Brand', 'contains', 'not-a-uuid'],
    ['Brand', 'contains', 5],
    ['Brand', 'containsAny', []],
  ];
  const short = (v: unknown) => {
    const text = JSON.stringify(v);
    return text.length > 24 ? `${text.slice(0, 20)}… (${Array.isArray(v) ? v.length : text.length})` : text;
  };
  for (const [attribute, op, value] of wrongValues)
    test(`${attribute} ${op} ${short(value)}: /value`, async () => {
      expect(await filterPointer(third({ attribute, op, value }))).toBe('/filter/and/2/value');
    });
  test('a missing value, and a value with exists: /value', async () => {
    for (const [attribute, op] of [
      ['tier', 'eq'],
      ['age', 'gt'],
      ['vip', 'eq'],
      ['work', 'domain'],
      ['tags', 'contains'],
      ['Brand', 'containsAny'],
    ])
      expect(await filterPointer(third({ attribute, op }))).toBe('/filter/and/2/value');
    for (const [attribute, value] of [
      ['tier', 'gold'],
      ['vip', true],
      ['vip', false],
      ['Brand', null],
    ])
      expect(await filterPointer(third({ attribute, op: 'exists', value }))).toBe('/filter/and/2/value');
  });
  test('a wrong entry of a list: /value/<index>', async () => {
    expect(await filterPointer(third({ attribute: 'tier', op: 'in', value: ['gold', 'silver', 3] }))).toBe(
      '/filter/and/2/value/2',
    );
    expect(await filterPointer(third({ attribute: 'age', op: 'in', value: [1, '2'] }))).toBe('/filter/and/2/value/1');
    expect(await filterPointer(third({ attribute: 'tags', op: 'containsAny', value: ['a', 'b', 'c', null] }))).toBe(
      '/filter/and/2/value/3',
    );
    expect(await filterPointer(third({ attribute: 'work', op: 'in', value: [true] }))).toBe('/filter/and/2/value/0');
    expect(await filterPointer(third({ attribute: 'tier', op: 'in', value: ['gold', ''] }))).toBe(
      '/filter/and/2/value/1',
    );
    expect(await filterPointer(third({ attribute: 'Brand', op: 'containsAny', value: [brand, 'not-a-uuid'] }))).toBe(
      '/filter/and/2/value/1',
    );
  });
  test('a Brand id that is not a brand of the account: /value (another account’s, or none)', async () => {
    expect(await filterPointer(third({ attribute: 'Brand', op: 'contains', value: otherBrand }))).toBe(
      '/filter/and/2/value',
    );
    expect(await filterPointer(third({ attribute: 'Brand', op: 'contains', value: crypto.randomUUID() }))).toBe(
      '/filter/and/2/value',
    );
    // In a list the docs give no entry pointer for this rule: the value or its entry.
    expect(await filterPointer(third({ attribute: 'Brand', op: 'containsAny', value: [brand, otherBrand] }))).toMatch(
      /^\/filter\/and\/2\/value(\/1)?$/,
    );
  });
  test('at the limits: 255 characters, 100 values, are taken', async () => {
    for (const leaf of [
      { attribute: 'tier', op: 'eq', value: 'x'.repeat(255) },
      { attribute: 'tier', op: 'prefix', value: 'é'.repeat(255) },
      { attribute: 'tier', op: 'in', value: Array.from({ length: 100 }, (_, i) => `v${i}`) },
      { attribute: 'age', op: 'in', value: Array.from({ length: 100 }, (_, i) => 1000 + i) },
      { attribute: 'Email', op: 'in', value: Array.from({ length: 100 }, (_, i) => `u${i}@x.io`) },
      { attribute: 'tags', op: 'containsAny', value: Array.from({ length: 100 }, (_, i) => `v${i}`) },
    ]) {
      const res = await count({ filter: leaf });
      expect(res.status, JSON.stringify(leaf).slice(0, 60)).toBe(200);
      expect(res.body).toEqual({ count: 0 });
    }
  });
  test('a deleted brand of the account is a brand a filter may name', async () => {
    const filter = { attribute: 'Brand', op: 'contains', value: deletedBrand };
    expect((await count({ filter })).body).toEqual({ count: 1 });
    const upper = { attribute: 'brand', op: 'containsAny', value: [brand.toUpperCase(), deletedBrand] };
    expect((await count({ filter: upper })).body).toEqual({ count: 3 });
  });

  test('an object of no form, or of two, or not an object: the node', async () => {
    for (const node of [
      {},
      { foo: 1 },
      { enabled: true, not: { enabled: false } },
      { and: [{ enabled: true }], or: [{ enabled: true }] },
      { enabled: true, attribute: 'tier', op: 'eq', value: 'gold' },
      { createdAt: { gte: '2020-01-01T00:00:00Z' }, attribute: 'tier', op: 'exists' },
      'tier = gold',
      [tierIs('gold')],
      null,
      5,
    ])
      expect(await filterPointer(third(node))).toBe('/filter/and/2');
    expect(await filterPointer({ not: {} })).toBe('/filter/not');
    expect(await filterPointer({ or: [{ enabled: true }, { nope: 1 }] })).toBe('/filter/or/1');
  });
  test('the filter itself not an object: /filter', async () => {
    for (const filter of ['x', 5, [], true]) expect(await filterPointer(filter)).toBe('/filter');
  });

  test('an and / or of no entries, or of more than 20: its list', async () => {
    expect(await filterPointer(third({ and: [] }))).toBe('/filter/and/2/and');
    expect(await filterPointer(third({ or: [] }))).toBe('/filter/and/2/or');
    expect(await filterPointer(third({ and: leafs(21) }))).toBe('/filter/and/2/and');
    expect(await filterPointer(third({ or: leafs(21) }))).toBe('/filter/and/2/or');
    expect(await filterPointer({ and: leafs(21) })).toBe('/filter/and');
    expect(await filterPointer(third({ or: { enabled: true } }))).toBe('/filter/and/2/or');
    // 20 is allowed.
    expect((await count({ filter: { or: leafs(20) } })).status).toBe(200);
  });

  test('over 5 levels deep: /filter; 5 levels are allowed', async () => {
    const nest = (levels: number): unknown => (levels === 1 ? tierIs('gold') : { and: [nest(levels - 1)] });
    const nestNot = (levels: number): unknown => (levels === 1 ? { enabled: true } : { not: nestNot(levels - 1) });
    expect(await filterPointer(nest(6))).toBe('/filter');
    expect(await filterPointer(nestNot(6))).toBe('/filter');
    expect(await filterPointer({ or: [tierIs('gold'), nest(5)] })).toBe('/filter');
    expect((await count({ filter: nest(5) })).body).toEqual({ count: 2 });
    expect((await count({ filter: nestNot(5) })).body).toEqual({ count: 5 });
  });

  test('over 50 conditions: /filter; 50 are allowed', async () => {
    const fifty = { or: [{ and: leafs(17) }, { and: leafs(17) }, { or: leafs(16) }] };
    expect((await count({ filter: fifty })).status).toBe(200);
    expect((await search({ filter: fifty })).status).toBe(200);
    const fiftyOne = { or: [{ and: leafs(17) }, { and: leafs(17) }, { or: leafs(17) }] };
    expect(await filterPointer(fiftyOne)).toBe('/filter');
    const withOthers = { or: [{ and: leafs(20) }, { and: leafs(20) }, { or: [...leafs(10), { enabled: true }] }] };
    expect(await filterPointer(withOthers)).toBe('/filter');
  });

  test('enabled not a boolean: /enabled', async () => {
    expect(await filterPointer(third({ enabled: 'true' }))).toBe('/filter/and/2/enabled');
    expect(await filterPointer({ enabled: null })).toBe('/filter/enabled');
  });

  test('createdAt without a bound, with another key, or with a bad date: its pointer', async () => {
    expect(await filterPointer(third({ createdAt: {} }))).toBe('/filter/and/2/createdAt');
    expect(await filterPointer(third({ createdAt: '2026-01-01T00:00:00Z' }))).toBe('/filter/and/2/createdAt');
    expect(await filterPointer(third({ createdAt: { gt: '2026-01-01T00:00:00Z' } }))).toBe('/filter/and/2/createdAt');
    for (const bad of [
      'yesterday',
      '2026-01-01',
      '2026-01-01T00:00:00',
      '2026-02-30T00:00:00Z',
      '2026-01-01T25:00:00Z',
      '',
      5,
      null,
    ]) {
      expect(await filterPointer(third({ createdAt: { gte: bad } }))).toBe('/filter/and/2/createdAt/gte');
      expect(await filterPointer({ createdAt: { gte: '2026-01-01T00:00:00Z', lt: bad } })).toBe('/filter/createdAt/lt');
    }
  });

  test('valid dates of every RFC 3339 form are taken', async () => {
    const all = await count({});
    for (const gte of ['2000-01-01T00:00:00Z', '2000-01-01t00:00:00.123456+02:00', '2000-01-01T00:00:00-05:30'])
      expect((await count({ filter: { createdAt: { gte } } })).body).toEqual(all.body);
    expect((await count({ filter: { createdAt: { lt: '2000-01-01T00:00:00.5Z' } } })).body).toEqual({ count: 0 });
  });
});

describe('the body: pageSize, unknown fields, cursor', () => {
  test('pageSize 0, 1001, "10", 1.5, null: /pageSize', async () => {
    const sizes = [0, 1001, -1, '10', 1.5, null, true];
    const answers: Record<string, string> = {};
    for (const pageSize of sizes) {
      const res = await search({ pageSize });
      answers[JSON.stringify(pageSize)] = res.status === 400 ? pointerOf(res) : `${res.status}`;
    }
    expect(answers).toEqual(Object.fromEntries(sizes.map((s) => [JSON.stringify(s), '/pageSize'])));
    expect((await search({ pageSize: 1000 })).status).toBe(200);
    expect((await search({ pageSize: 1 })).body.data).toHaveLength(1);
  });
  test('an unknown field: its pointer', async () => {
    expect(pointerOf(await search({ filters: { enabled: true } }))).toBe('/filters');
    expect(pointerOf(await search({ filter: { enabled: true }, limit: 5 }))).toBe('/limit');
    expect(pointerOf(await count({ pageSize: 10 }))).toBe('/pageSize');
    expect(pointerOf(await count({ cursor: 'x' }))).toBe('/cursor');
  });
  test('a body that is not an object is a 400; no body is every contact', async () => {
    for (const raw of ['[]', '"x"', '{']) {
      const res = await t.call('POST', '/v1/contact-searches', {
        raw,
        headers: { 'content-type': 'application/json' },
      });
      expectProblem(res, 400, 'invalid_request_error');
    }
    expect((await t.call('POST', '/v1/contact-counts')).body).toEqual({ count: CONTACTS.length });
    expect((await t.call('POST', '/v1/contact-searches')).body.data).toHaveLength(CONTACTS.length);
  });

  test('a malformed cursor, or not a string: /cursor', async () => {
    const page = await search({ pageSize: 2 });
    const next: string = page.body.next;
    expect(next).toBeString();
    const tampered = next.slice(0, -2) + (next.endsWith('AA') ? 'BB' : 'AA');
    for (const cursor of ['', 'abc', 'czEu', tampered, next + 'x', 5, null, { after: 'x' }])
      expect(pointerOf(await search({ cursor }))).toBe('/cursor');
  });
  test('a cursor sent with another filter, none included, or given none: /cursor', async () => {
    const gold = { attribute: 'tier', op: 'eq', value: 'gold' };
    const withFilter = (await search({ filter: gold, pageSize: 1 })).body.next;
    expect(withFilter).toBeString();
    expect(pointerOf(await search({ cursor: withFilter }))).toBe('/cursor');
    expect(pointerOf(await search({ filter: { ...gold, value: 'Gold' }, cursor: withFilter }))).toBe('/cursor');
    expect(pointerOf(await search({ filter: { enabled: true }, cursor: withFilter }))).toBe('/cursor');
    const without = (await search({ pageSize: 1 })).body.next;
    expect(without).toBeString();
    expect(pointerOf(await search({ filter: gold, cursor: without }))).toBe('/cursor');
    expect((await search({ cursor: without })).status).toBe(200);
  });
  test('a cursor continues the same filter in another key order and attribute-name case', async () => {
    const filter = {
      or: [
        { attribute: 'tier', op: 'prefix', value: 'g' },
        { attribute: 'tier', op: 'prefix', value: 'G' },
        { not: { attribute: 'vip', op: 'exists' } },
      ],
    };
    const same = {
      or: [
        { value: 'g', op: 'prefix', attribute: 'TIER' },
        { op: 'prefix', attribute: 'Tier', value: 'G' },
        { not: { op: 'exists', attribute: 'VIP' } },
      ],
    };
    const whole = await search({ filter });
    expect(whole.body.next).toBeNull();
    const expected = whole.body.data.map((c: { email: string }) => c.email);
    expect(expected).toHaveLength(5);
    const got: string[] = [];
    let body: Record<string, unknown> = { pageSize: 1, filter };
    for (let page = 0; page < 10; page++) {
      const res = await search(body);
      expect(res.status).toBe(200);
      got.push(...res.body.data.map((c: { email: string }) => c.email));
      if (res.body.next === null) break;
      // Each later page with the filter written another way, the body's keys in another order too.
      body =
        page % 2
          ? { cursor: res.body.next, filter: same, pageSize: 1 }
          : { filter: same, pageSize: 1, cursor: res.body.next };
    }
    expect(got).toEqual(expected);
  });
  test('pages by emailMd5 ascending, each contact as GET gives it, and next null after the last', async () => {
    const pages: any[] = [];
    let cursor: string | undefined;
    do {
      const res = await search({ pageSize: 4, ...(cursor && { cursor }) });
      expect(res.status).toBe(200);
      pages.push(...res.body.data);
      cursor = res.body.next ?? undefined;
    } while (cursor);
    expect(pages.map((c) => c.emailMd5)).toEqual(pages.map((c) => c.emailMd5).sort());
    expect(pages).toHaveLength(CONTACTS.length);
    for (const c of pages) expect((await t.call('GET', `/v1/contacts/${c.emailMd5}`)).body).toEqual(c);
    // A page exactly at the end: next may be a cursor to an empty page, or null.
    const exact = await search({ pageSize: CONTACTS.length });
    if (exact.body.next !== null)
      expect((await search({ pageSize: CONTACTS.length, cursor: exact.body.next })).body).toEqual({
        data: [],
        next: null,
      });
  });
  test('what the filter language means, on known contacts', async () => {
    const emails = async (filter: unknown) =>
      ((await search({ filter })).body.data as { email: string }[]).map((c) => c.email).sort();
    expect(await emails({ attribute: 'Email', op: 'domain', value: 'GMAIL.com' })).toEqual([
      'Bob@Gmail.com',
      'cy@gmail.com',
    ]);
    expect(await emails({ attribute: 'email', op: 'eq', value: 'BOB@gmail.COM' })).toEqual(['Bob@Gmail.com']);
    expect(await emails({ attribute: 'work', op: 'domain', value: 'work.EXAMPLE' })).toEqual([
      'ann@example.com',
      'dee@example.org',
    ]);
    expect(await emails({ attribute: 'work:domain', op: 'eq', value: 'work.example' })).toEqual([
      'ann@example.com',
      'dee@example.org',
    ]);
    expect(await emails({ attribute: 'tier', op: 'ne', value: 'gold' })).toEqual(['Bob@Gmail.com', 'dee@example.org']);
    expect(await emails({ attribute: 'vip', op: 'eq', value: false })).toEqual(['Bob@Gmail.com']);
    expect(await emails({ attribute: 'vip', op: 'exists' })).toEqual([
      'Bob@Gmail.com',
      'ann@example.com',
      'dee@example.org',
    ]);
    expect(await emails({ enabled: false })).toEqual(['eve@x.io']);
    // A prefix is literal text: LIKE's `%`, `_` and `\` match only themselves.
    for (const value of ['%', '_', 'g%', 'g_ld', '_old', '\\', 'gold\\'])
      expect(await emails({ attribute: 'tier', op: 'prefix', value })).toEqual([]);
    expect(await emails({ attribute: 'tier', op: 'prefix', value: 'gol' })).toEqual([
      'ann@example.com',
      'cy@gmail.com',
    ]);
    expect(await emails({ attribute: 'tier', op: 'in', value: ['Gold', 'silver'] })).toEqual([
      'Bob@Gmail.com',
      'dee@example.org',
    ]);
    expect(await emails({ attribute: 'age', op: 'gte', value: 31 })).toEqual([
      'ann@example.com',
      'cy@gmail.com',
      'eve@x.io',
    ]);
    expect(await emails({ not: { attribute: 'Brand', op: 'exists' } })).toEqual([
      'dee@example.org',
      'eve@x.io',
      'fay@x.io',
    ]);
  });
});

describe('scope', () => {
  test('a key without contacts:read is 403 on the three routes', async () => {
    const key = await createKey(t.db.sql, t.accountId, ['contacts:write', 'imports:read', 'imports:write']);
    expectProblem(await search({}, key), 403, 'permission_error');
    expectProblem(await count({}, key), 403, 'permission_error');
    expectProblem(await t.call('GET', '/v1/contact-stats', { key }), 403, 'permission_error');
    const reader = await createKey(t.db.sql, t.accountId, ['contacts:read']);
    expect((await search({}, reader)).status).toBe(200);
    expect((await count({}, reader)).status).toBe(200);
    expect((await t.call('GET', '/v1/contact-stats', { key: reader })).status).toBe(200);
  });
  test('no key is 401', async () => {
    expectProblem(await t.call('POST', '/v1/contact-searches', { body: {}, key: null }), 401, 'authentication_error');
  });
});

describe('exports of a search', () => {
  const token = crypto.randomUUID();

  /** POSTs an export, runs it as the worker does, and returns it and its file's Email column. */
  async function exported(filter: unknown) {
    const created = await t.call('POST', '/v1/contact-exports', { body: { filter, columns: ['Email', 'tier'] } });
    expect(created.status).toBe(202);
    expect(await runNextExport(t.db.sql, files.store, token, 7)).toBe('success');
    const got = await t.call('GET', `/v1/contact-exports/${created.body.id}`);
    expect(got.status).toBe(200);
    const res = await t.app.handle(new Request(`http://localhost${new URL(got.body.downloadUrl).pathname}`));
    expect(res.status).toBe(200);
    const rows = Papa.parse<string[]>((await res.text()).replace(/\n$/, ''), { header: false }).data;
    expect(rows[0]).toEqual(['Email', 'tier']);
    return {
      created: created.body,
      got: got.body,
      emails: rows
        .slice(1)
        .map((r) => r[0]!)
        .sort(),
    };
  }
  const searched = async (filter: unknown) =>
    ((await search({ filter, pageSize: 1000 })).body.data as { email: string }[]).map((c) => c.email).sort();

  test('the file holds exactly the search’s contacts; the export shows the filter as sent', async () => {
    for (const filter of [
      {
        or: [
          { attribute: 'TIER', op: 'eq', value: 'gold' },
          { attribute: 'work', op: 'domain', value: 'Work.Example' },
        ],
      },
      { and: [{ enabled: true }, { not: { attribute: 'brand', op: 'contains', value: brand } }] },
      { attribute: 'age', op: 'lt', value: 35 },
      { enabled: false },
      { attribute: 'tier', op: 'eq', value: 'nobody' },
    ]) {
      const { created, got, emails } = await exported(filter);
      expect(emails).toEqual(await searched(filter));
      expect(created.filter).toEqual(filter);
      expect(got.filter).toEqual(filter);
      expect(got.rowCount).toBe(emails.length);
    }
  });
  test('a bad filter of the language is the search’s 400, its pointer under /filter', async () => {
    const post = (filter: unknown) => t.call('POST', '/v1/contact-exports', { body: { filter } });
    expect(pointerOf(await post(third({ attribute: 'nope', op: 'eq', value: 'x' })))).toBe('/filter/and/2/attribute');
    expect(pointerOf(await post(third({ attribute: 'age', op: 'prefix', value: '1' })))).toBe('/filter/and/2/op');
    expect(pointerOf(await post(third({ attribute: 'age', op: 'eq', value: '1' })))).toBe('/filter/and/2/value');
    expect(pointerOf(await post(third({ attribute: 'Brand', op: 'contains', value: otherBrand })))).toBe(
      '/filter/and/2/value',
    );
    expect(pointerOf(await post({ not: { not: { not: { not: { not: { enabled: true } } } } } }))).toBe('/filter');
    expect(pointerOf(await post({ and: [] }))).toBe('/filter/and');
    expect(pointerOf(await post({ createdAt: {} }))).toBe('/filter/createdAt');
    // Nothing was queued by them.
    expect((await t.call('GET', '/v1/contact-exports')).body.data.every((e: any) => e.status === 'success')).toBe(true);
  });
  test('the shorthand {brandIds, enabled} still works, and is shown as sent', async () => {
    const shorthand = { brandIds: [brand, deletedBrand], enabled: true };
    const { got, emails } = await exported(shorthand);
    expect(got.filter).toEqual(shorthand);
    expect(emails).toEqual(
      await searched({
        and: [{ attribute: 'Brand', op: 'containsAny', value: [brand, deletedBrand] }, { enabled: true }],
      }),
    );
    expect(emails).toHaveLength(3);
    const disabled = await exported({ enabled: false });
    expect(disabled.emails).toEqual(['eve@x.io']);
    expect(
      pointerOf(await t.call('POST', '/v1/contact-exports', { body: { filter: { brandIds: [otherBrand] } } })),
    ).toBe('/filter/brandIds');
  });
});

describe('live between pages', () => {
  test('a contact written between two pages is found by the later page when it lies beyond the cursor', async () => {
    const first = await search({ filter: { attribute: 'Brand', op: 'exists' }, pageSize: 1 });
    expect(first.status).toBe(200);
    const after: string = first.body.data[0].emailMd5;
    // An address whose emailMd5 sorts after the first page's, on the brand the filter asks for.
    let email = '';
    for (let i = 0; !email; i++) if (Bun.MD5.hash(`live${i}@x.io`, 'hex') > after) email = `live${i}@x.io`;
    const created = await t.call('POST', '/v1/contacts', { body: { email, brandIds: [brand] } });
    expect(created.status).toBe(201);
    try {
      const rest: string[] = [];
      let cursor: string | null = first.body.next;
      while (cursor) {
        const page = await search({ filter: { attribute: 'Brand', op: 'exists' }, pageSize: 1, cursor });
        expect(page.status).toBe(200);
        rest.push(...page.body.data.map((c: { email: string }) => c.email));
        cursor = page.body.next;
      }
      expect(rest).toContain(email);
      expect(rest).toHaveLength(3);
      const stats = await t.call('GET', '/v1/contact-stats');
      expect(stats.body).toEqual({
        total: CONTACTS.length + 1,
        enabled: CONTACTS.length,
        disabled: 1,
        brands: [{ brandId: brand, count: 3 }],
      });
    } finally {
      expect((await t.call('DELETE', `/v1/contacts/${created.body.emailMd5}`)).status).toBe(204);
    }
    expect((await count({ filter: { attribute: 'Brand', op: 'exists' } })).body).toEqual({ count: 3 });
  });
});

describe('SEARCH_TIMEOUT_MS', () => {
  let slow: TestApp;
  const ROWS = 200_000;

  beforeAll(async () => {
    slow = await testApp({}, { SEARCH_TIMEOUT_MS: '100' });
    await createAttribute(slow.db.sql, slow.accountId, 'work', 'email');
    // Written in bulk, not through the API: only their number matters here.
    await slow.db.sql`
      insert into contacts (account_id, email_md5, email, attributes, first_source)
      select ${slow.accountId}, md5('u' || i || '@example.com')::uuid, 'u' || i || '@example.com',
        jsonb_build_object('work', 'w' || i || '@work.example'), 'import'
      from generate_series(1, ${ROWS}) i`;
    await slow.db.sql`analyze contacts`;
  }, 120_000);
  afterAll(async () => {
    await slow?.close();
  });

  /** 50 conditions over a derived hash: each computes a sha512 per contact, and none matches. */
  const hashes = (n: number, from: number) =>
    Array.from({ length: n }, (_, i) => ({ attribute: 'work:sha512', op: 'prefix', value: `zz${from + i}` }));
  const heavy = { or: [{ or: hashes(17, 0) }, { or: hashes(17, 17) }, { or: hashes(16, 34) }] };

  /** Active statements of the test database other than this one's, on the coordinator and every worker. */
  async function activeStatements(): Promise<string[]> {
    const out: string[] = [];
    for (const url of [slow.db.url, ...slow.db.workerUrls]) {
      const sql = connect(url, 1);
      try {
        const rows = await sql<{ query: string }[]>`
          select query from pg_stat_activity
          where datname = current_database() and pid <> pg_backend_pid() and state = 'active'
            and query ilike '%contacts%'`;
        out.push(...rows.map((r) => r.query));
      } finally {
        await sql.end({ timeout: 2 });
      }
    }
    return out;
  }

  test('a search or count past it is a 504 problem, and the statement is gone from the database after', async () => {
    for (const [route, body] of [
      ['/v1/contact-counts', { filter: heavy }],
      ['/v1/contact-searches', { filter: heavy, pageSize: 10 }],
    ] as const) {
      const started = performance.now();
      const res = await slow.call('POST', route, { body });
      const ms = performance.now() - started;
      console.log(`${route} past SEARCH_TIMEOUT_MS=100 over ${ROWS} contacts: ${res.status} in ${ms.toFixed(0)} ms`);
      const problem = expectProblem(res, 504, 'api_error');
      expect(problem.title).toBe('Search timed out');
      // Cancelled by the database near the bound, not left to run.
      expect(ms).toBeLessThan(5_000);
      expect(await activeStatements()).toEqual([]);
    }
    // The app's connections are fine after: a light request answers.
    const light = await slow.call('POST', '/v1/contact-searches', {
      body: { filter: { attribute: 'Email', op: 'eq', value: 'u7@example.com' } },
    });
    expect(light.status).toBe(200);
    expect(light.body.data).toHaveLength(1);
  });
});

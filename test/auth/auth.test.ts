// Authentication, scopes, the order of checks and account isolation (spec: Authentication; DESIGN: auth,
// order of checks, "another account's ids are 404").
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ALL_SCOPES, type Scope } from '../../src/auth/scopes';
import { expectProblem, testApp, type Call, type TestApp } from '../helpers/app';
import {
  createAccount,
  createBrand,
  createKey,
  createSuppressionList,
  revokeKey,
  suspendAccount,
} from '../helpers/fixtures';

let t: TestApp;
let brandId: string;
let listId: string;

beforeAll(async () => {
  t = await testApp();
  brandId = await createBrand(t.db.sql, t.accountId, 'Own brand');
  listId = await createSuppressionList(t.db.sql, t.accountId, 'Own list', 'md5');
});
afterAll(() => t.close());

const UUID = '00000000-0000-4000-8000-000000000000';
const MD5 = '0123456789abcdef0123456789abcdef';

/** Splits a `ck_<id>_<secret>` key into its parts. */
function partsOf(key: string): { id: string; secret: string } {
  const m = /^ck_([0-9a-f]{32})_(.+)$/.exec(key);
  if (!m) throw new Error(`not a key: ${key}`);
  return { id: m[1]!, secret: m[2]! };
}

function expect401(res: Call) {
  const body = expectProblem(res, 401, 'authentication_error');
  expect(res.headers.get('www-authenticate') ?? '').toMatch(/^Bearer\b/);
  return body;
}

describe('Authentication', () => {
  test('a valid key is accepted (the baseline every refusal below differs from)', async () => {
    const res = await t.call('GET', '/v1/brands');
    expect(res.status).toBe(200);
  });

  test('a missing Authorization header is 401 authentication_error with WWW-Authenticate: Bearer', async () => {
    expect401(await t.call('GET', '/v1/brands', { key: null }));
  });

  test('an empty Authorization header is 401', async () => {
    expect401(await t.call('GET', '/v1/brands', { key: null, headers: { authorization: '' } }));
  });

  test('a scheme other than Bearer is 401, even with a valid key', async () => {
    for (const scheme of ['Basic', 'Token', 'Key', 'Bearer:']) {
      expect401(await t.call('GET', '/v1/brands', { key: null, headers: { authorization: `${scheme} ${t.key}` } }));
    }
    expect401(await t.call('GET', '/v1/brands', { key: null, headers: { authorization: t.key } }));
  });

  test('the Bearer scheme name is case-insensitive (RFC 9110)', async () => {
    const res = await t.call('GET', '/v1/brands', { key: null, headers: { authorization: `bearer ${t.key}` } });
    expect(res.status).toBe(200);
  });

  test('a malformed key is 401', async () => {
    const { id, secret } = partsOf(t.key);
    const malformed = [
      'nonsense',
      `ck_${id}`,
      `ck_${id}_`,
      `ck_${id.slice(1)}_${secret}`,
      `ck_${id.toUpperCase()}_${secret}`,
      `xk_${id}_${secret}`,
      `ck_${id}_${secret} extra`,
      `ck_${id}_short`,
      `ck_${id}_${secret}!`,
    ];
    for (const key of malformed) expect401(await t.call('GET', '/v1/brands', { key }));
  });

  test('a well-formed key with an unknown key id is 401', async () => {
    const { secret } = partsOf(t.key);
    const unknownId = crypto.randomUUID().replaceAll('-', '');
    expect401(await t.call('GET', '/v1/brands', { key: `ck_${unknownId}_${secret}` }));
  });

  test('the right key id with a wrong secret is 401', async () => {
    const { id, secret } = partsOf(t.key);
    const wrong = (secret[0] === 'A' ? 'B' : 'A') + secret.slice(1);
    expect401(await t.call('GET', '/v1/brands', { key: `ck_${id}_${wrong}` }));
    expect401(await t.call('GET', '/v1/brands', { key: `ck_${id}_${'x'.repeat(43)}` }));
  });

  test('a revoked key is 401', async () => {
    const key = await createKey(t.db.sql, t.accountId);
    expect((await t.call('GET', '/v1/brands', { key })).status).toBe(200);
    await revokeKey(t.db.sql, key);
    expect401(await t.call('GET', '/v1/brands', { key }));
  });

  test('a key of a suspended account is 403 permission_error', async () => {
    const account = await createAccount(t.db.sql, 'Suspended');
    const key = await createKey(t.db.sql, account);
    expect((await t.call('GET', '/v1/brands', { key })).status).toBe(200);
    await suspendAccount(t.db.sql, account);
    const res = await t.call('GET', '/v1/brands', { key });
    expectProblem(res, 403, 'permission_error');
    expect((await t.call('GET', '/v1/contact-schema', { key })).status).toBe(403);
  });

  test('a wrong secret for a suspended account is still 401 (the key is checked first)', async () => {
    const account = await createAccount(t.db.sql, 'Suspended 2');
    const key = await createKey(t.db.sql, account);
    await suspendAccount(t.db.sql, account);
    const { id, secret } = partsOf(key);
    expect401(await t.call('GET', '/v1/brands', { key: `ck_${id}_${secret.split('').reverse().join('')}` }));
  });

  test('every /v1 path needs a key, including unknown ones', async () => {
    expect401(await t.call('GET', '/v1/no-such-thing', { key: null }));
    expect401(await t.call('GET', '/v1', { key: null }));
  });
});

describe('Scopes', () => {
  // Every endpoint family with the scope it needs. Routes other modules own may not exist yet; the
  // scope check runs before routing, so the refusal is the same either way.
  const families: { scope: Scope; method: string; label: string; path: () => string; body?: unknown }[] = [
    { scope: 'brands:read', method: 'GET', label: '/v1/brands', path: () => '/v1/brands' },
    { scope: 'brands:read', method: 'GET', label: '/v1/brands/{brandId}', path: () => `/v1/brands/${brandId}` },
    { scope: 'contacts:read', method: 'GET', label: '/v1/contact-schema', path: () => '/v1/contact-schema' },
    { scope: 'contacts:read', method: 'GET', label: '/v1/contacts/{emailMd5}', path: () => `/v1/contacts/${MD5}` },
    {
      scope: 'contacts:read',
      method: 'GET',
      label: '/v1/contacts/{emailMd5}/brands',
      path: () => `/v1/contacts/${MD5}/brands`,
    },
    {
      scope: 'contacts:write',
      method: 'POST',
      label: '/v1/contacts',
      path: () => '/v1/contacts',
      body: { email: 'a@example.com' },
    },
    {
      scope: 'contacts:write',
      method: 'PATCH',
      label: '/v1/contacts/{emailMd5}',
      path: () => `/v1/contacts/${MD5}`,
      body: { attributes: {} },
    },
    {
      scope: 'contacts:write',
      method: 'DELETE',
      label: '/v1/contacts/{emailMd5}/brands/{brandId}',
      path: () => `/v1/contacts/${MD5}/brands/${brandId}`,
    },
    { scope: 'suppressions:read', method: 'GET', label: '/v1/suppression-lists', path: () => '/v1/suppression-lists' },
    {
      scope: 'suppressions:read',
      method: 'GET',
      label: '/v1/suppression-lists/{listId}',
      path: () => `/v1/suppression-lists/${listId}`,
    },
    {
      scope: 'suppressions:read',
      method: 'GET',
      label: '/v1/suppression-lists/{listId}/imports',
      path: () => `/v1/suppression-lists/${listId}/imports`,
    },
    {
      scope: 'suppressions:write',
      method: 'POST',
      label: '/v1/suppression-lists/{listId}/records',
      path: () => `/v1/suppression-lists/${listId}/records`,
      body: { records: [MD5] },
    },
    { scope: 'imports:read', method: 'GET', label: '/v1/contact-imports', path: () => '/v1/contact-imports' },
    {
      scope: 'imports:read',
      method: 'GET',
      label: '/v1/contact-imports/{importId}',
      path: () => `/v1/contact-imports/${UUID}`,
    },
    {
      scope: 'imports:write',
      method: 'POST',
      label: '/v1/contact-imports',
      path: () => '/v1/contact-imports',
      body: { columns: ['Email'], duplicateContactStrategy: 'skip' },
    },
  ];

  for (const f of families) {
    test(`${f.method} ${f.label} needs ${f.scope}: without it 403, with only it no 401/403`, async () => {
      const without = await createKey(
        t.db.sql,
        t.accountId,
        ALL_SCOPES.filter((s) => s !== f.scope),
      );
      const res = await t.call(f.method, f.path(), { key: without, body: f.body });
      const body = expectProblem(res, 403, 'permission_error');
      expect(body.detail).toContain(f.scope);
      expect(res.headers.get('www-authenticate')).toBeNull();

      const only = await createKey(t.db.sql, t.accountId, [f.scope]);
      const ok = await t.call(f.method, f.path(), { key: only, body: f.body });
      expect([401, 403]).not.toContain(ok.status);
    });
  }

  test('a key with no scopes at all is refused on read endpoints with 403', async () => {
    const none = await createKey(t.db.sql, t.accountId, []);
    for (const path of ['/v1/brands', '/v1/contact-schema', '/v1/suppression-lists']) {
      expectProblem(await t.call('GET', path, { key: none }), 403, 'permission_error');
    }
  });

  test('the endpoints read by these families answer 200 with their scope alone', async () => {
    for (const [scope, path] of [
      ['brands:read', '/v1/brands'],
      ['brands:read', `/v1/brands/${brandId}`],
      ['contacts:read', '/v1/contact-schema'],
      ['suppressions:read', '/v1/suppression-lists'],
      ['suppressions:read', `/v1/suppression-lists/${listId}`],
    ] as const) {
      const key = await createKey(t.db.sql, t.accountId, [scope]);
      expect((await t.call('GET', path, { key })).status).toBe(200);
    }
  });
});

describe('Order of checks: key (401) → scope (403) → request shape (400) → existence (404)', () => {
  test('a bad key with a malformed body is 401', async () => {
    const res = await t.call('POST', `/v1/suppression-lists/${listId}/records`, {
      key: 'ck_nope',
      raw: '{"records": [',
      headers: { 'content-type': 'application/json' },
    });
    expect401(res);
  });

  test('a bad key with a malformed query is 401', async () => {
    expect401(await t.call('GET', '/v1/brands?pageSize=9&bogus=1', { key: null }));
  });

  test('a key without the scope, with a malformed query, is 403', async () => {
    const key = await createKey(t.db.sql, t.accountId, ['contacts:read']);
    expectProblem(await t.call('GET', '/v1/brands?pageSize=9&name[regex]=x', { key }), 403, 'permission_error');
    expectProblem(await t.call('GET', '/v1/suppression-lists?sort=bogus', { key }), 403, 'permission_error');
  });

  test('a key without the scope, with a malformed path id, is 403', async () => {
    const key = await createKey(t.db.sql, t.accountId, ['contacts:read']);
    expectProblem(await t.call('GET', '/v1/brands/not-a-uuid', { key }), 403, 'permission_error');
  });

  test('a key without the write scope, with a malformed body, is 403', async () => {
    const key = await createKey(t.db.sql, t.accountId, ['suppressions:read']);
    const res = await t.call('POST', `/v1/suppression-lists/${listId}/records`, {
      key,
      raw: '{"records": [',
      headers: { 'content-type': 'application/json' },
    });
    expectProblem(res, 403, 'permission_error');
  });

  test('a suspended account with a malformed query is 403', async () => {
    const account = await createAccount(t.db.sql, 'Suspended 3');
    const key = await createKey(t.db.sql, account);
    await suspendAccount(t.db.sql, account);
    expectProblem(await t.call('GET', '/v1/brands?page=0', { key }), 403, 'permission_error');
  });

  test('a malformed id is 400 before existence is looked at', async () => {
    expectProblem(await t.call('GET', '/v1/brands/123'), 400, 'invalid_request_error');
    expectProblem(await t.call('GET', '/v1/suppression-lists/123'), 400, 'invalid_request_error');
  });
});

describe("Another account's resources", () => {
  let other: { id: string; key: string; brandId: string; listId: string };

  beforeAll(async () => {
    const id = await createAccount(t.db.sql, 'Other');
    other = {
      id,
      key: await createKey(t.db.sql, id),
      brandId: await createBrand(t.db.sql, id, 'Other brand'),
      listId: await createSuppressionList(t.db.sql, id, 'Other list', 'plain text'),
    };
  });

  test("another account's brand id is 404 not_found_error, not 403", async () => {
    expectProblem(await t.call('GET', `/v1/brands/${other.brandId}`), 404, 'not_found_error');
    // and its owner sees it
    expect((await t.call('GET', `/v1/brands/${other.brandId}`, { key: other.key })).status).toBe(200);
  });

  test("another account's suppression list id is 404 not_found_error, not 403", async () => {
    expectProblem(await t.call('GET', `/v1/suppression-lists/${other.listId}`), 404, 'not_found_error');
    expect((await t.call('GET', `/v1/suppression-lists/${other.listId}`, { key: other.key })).status).toBe(200);
  });

  test("another account's brands and lists are not in the listings", async () => {
    const brands = await t.call('GET', '/v1/brands');
    expect(brands.body.data.map((b: { id: string }) => b.id)).not.toContain(other.brandId);
    const lists = await t.call('GET', '/v1/suppression-lists');
    expect(lists.body.data.map((l: { id: string }) => l.id)).not.toContain(other.listId);
    const theirs = await t.call('GET', '/v1/brands', { key: other.key });
    expect(theirs.body.data.map((b: { id: string }) => b.id)).toEqual([other.brandId]);
  });
});

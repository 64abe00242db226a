// The in-process key and schema caches (src/auth/cache.ts) and the one-statement contact paths
// (src/contacts/fast-path.ts): a change committed before a request is always seen, notifications
// keep the caches fresh, and GET, POST and PATCH cost one statement once the caches are warm.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { buildApp } from '../../src/app';
import { cacheChanged, LiveCache, type CachedTable } from '../../src/auth/cache';
import { connect, type Sql, type Tx } from '../../src/db';
import { apiNodeUrl, expectProblem, testApp, type Call, type TestApp } from '../helpers/app';
import { createAccount, createAttribute, createKey } from '../helpers/fixtures';
import { md5 } from '../contacts/contacts-support';

let t: TestApp;
/** Statements the counted app sent, in order. */
let statements: string[] = [];
let counted: Sql;
/** The counted app's node (on a Citus cluster a worker, while changes are made on the coordinator). */
let node: Sql;
let app: ReturnType<typeof buildApp>;
let n = 0;

beforeAll(async () => {
  t = await testApp();
  const url = apiNodeUrl(t.db);
  const debug = (_connection: number, query: string) => statements.push(query);
  counted = connect(url, 10, { debug });
  node = connect(url, 1);
  // On a cluster the fast path's statements go to the account's node: counted there too.
  app = buildApp({ ...t.deps, sql: counted, nodePool: (address) => connect(url, 10, { node: address, debug }) });
  await createAttribute(t.db.sql, t.accountId, 'city', 'string');
});
afterAll(async () => {
  await counted.end({ timeout: 2 });
  await node.end({ timeout: 2 });
  await t.close();
});

const fresh = () => `cache.${++n}@example.com`;

/** Calls the counted app; `sent` is what it sent to the database for this request. */
async function call(method: string, path: string, key: string, body?: unknown): Promise<Call & { sent: string[] }> {
  statements = [];
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await app.handle(
    new Request(`http://localhost${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, sent: statements };
}

/** Whether the counted app's caches have stayed warm once: its listeners are all up. */
let settled = false;

/**
 * Repeats a GET until it is answered in one statement: the key and the schema are cached. The first
 * time, also until a GET a second later still is: on a cluster the app's listener starts listening
 * on the other nodes only once its own connection listens, and each node's first LISTEN clears the
 * caches (src/auth/cache.ts InvalidationListener), which a slow machine showed as a request of two
 * statements just after the caches had warmed.
 */
async function warm(key: string, path: string): Promise<void> {
  for (let round = 0; round < 5; round++) {
    await warmOnce(key, path);
    if (settled) return;
    await Bun.sleep(1_000);
    settled = (await call('GET', path, key)).sent.length === 1;
  }
  throw new Error('the caches did not stay warm for a second');
}

async function warmOnce(key: string, path: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const res = await call('GET', path, key);
    if (res.status === 200 && res.sent.length === 1) return;
    await Bun.sleep(20);
  }
  throw new Error('the caches did not warm up within 2 s');
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await Bun.sleep(20);
  }
  throw new Error(`${what} did not happen within 2 s`);
}

async function newContact(key: string): Promise<string> {
  const email = fresh();
  const res = await call('POST', '/v1/contacts', key, { email });
  expect(res.status).toBe(201);
  return md5(email);
}

/** A new key of `account` and a contact it created, both in the caches. */
async function warmKeyAndContact(account = t.accountId): Promise<{ key: string; contact: string }> {
  const key = await createKey(t.db.sql, account);
  const contact = await newContact(key);
  await warm(key, `/v1/contacts/${contact}`);
  return { key, contact };
}

const uuidOfKey = (key: string) => {
  const hex = /^ck_([0-9a-f]{32})_/.exec(key)![1]!;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
};

describe('round trips once the caches are warm', () => {
  test('GET, POST of a new email and PATCH are one statement each', async () => {
    const { key, contact } = await warmKeyAndContact();
    expect((await call('GET', `/v1/contacts/${contact}`, key)).sent).toHaveLength(1);
    const posted = await call('POST', '/v1/contacts', key, { email: fresh(), attributes: { city: 'Oslo' } });
    expect(posted.status).toBe(201);
    expect(posted.sent).toHaveLength(1);
    const patched = await call('PATCH', `/v1/contacts/${contact}`, key, { attributes: { city: 'Rome' } });
    expect(patched.status).toBe(200);
    expect(patched.body.attributes).toEqual({ city: 'Rome' });
    expect(patched.sent).toHaveLength(1);
  });

  test('a cold request authenticates first, then still writes in one statement', async () => {
    const key = await createKey(t.db.sql, t.accountId);
    const res = await call('POST', '/v1/contacts', key, { email: fresh() });
    expect(res.status).toBe(201);
    expect(res.sent).toHaveLength(2);
    expect(res.sent[0]).toContain('from api_keys');
  });
});

/**
 * A change made by hand in SQL, with cache_changed in its transaction as sql/migrations/
 * 0006_cache_changes.sql asks of one (the admin CLI and the API do the same in code).
 */
const bySql = (account: string, what: CachedTable, change: (tx: Tx) => Promise<unknown>, keyId?: string) =>
  t.db.sql.begin(async (tx) => {
    await change(tx);
    await cacheChanged(tx, account, what, keyId);
  });
async function keyBySql(key: string, change: (tx: Tx, id: string) => Promise<unknown>) {
  const id = uuidOfKey(key);
  const [row] = await t.db.sql<{ account_id: string }[]>`select account_id from api_keys where id = ${id}`;
  await bySql(row!.account_id, 'api_keys', (tx) => change(tx, id), id);
}

describe('a change committed before a request is always seen (50 times each, caches warm every time)', () => {
  const ROUNDS = 50;

  test('a key revoked by SQL is 401 at once, on GET, POST and PATCH', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const { key, contact } = await warmKeyAndContact();
      await keyBySql(key, (tx, id) => tx`update api_keys set revoked_at = now() where id = ${id}`);
      const [get, post, patch] = [
        await call('GET', `/v1/contacts/${contact}`, key),
        await call('POST', '/v1/contacts', key, { email: fresh() }),
        await call('PATCH', `/v1/contacts/${contact}`, key, { attributes: { city: 'x' } }),
      ];
      for (const res of [get, post, patch]) expectProblem(res, 401, 'authentication_error');
    }
    expect(
      (await t.db.sql`select 1 from contacts where account_id = ${t.accountId} and attributes->>'city' = 'x'`).length,
    ).toBe(0);
  });

  test('a key revoked by SQL is 401 at once even when the request is malformed (401 before 400)', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const { key } = await warmKeyAndContact();
      await keyBySql(key, (tx, id) => tx`update api_keys set revoked_at = now() where id = ${id}`);
      expectProblem(await call('POST', '/v1/contacts', key, { email: 'not an email' }), 401, 'authentication_error');
      expectProblem(await call('GET', '/v1/contacts/not-an-md5', key), 401, 'authentication_error');
      expectProblem(
        await call('PATCH', `/v1/contacts/${md5('nobody@example.com')}`, key, { attributes: {} }),
        401,
        'authentication_error',
      );
    }
  });

  test('a key whose account is suspended by SQL is 403 at once', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const account = await createAccount(t.db.sql, `Suspended ${i}`);
      const { key, contact } = await warmKeyAndContact(account);
      await bySql(account, 'accounts', (tx) => tx`update accounts set suspended_at = now() where id = ${account}`);
      expectProblem(await call('GET', `/v1/contacts/${contact}`, key), 403, 'permission_error');
      expectProblem(await call('POST', '/v1/contacts', key, { email: fresh() }), 403, 'permission_error');
      expectProblem(await call('PATCH', `/v1/contacts/${contact}`, key, { attributes: {} }), 403, 'permission_error');
    }
  });

  test('a scope removed by SQL is 403 at once; a secret changed by SQL is 401 at once', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const { key, contact } = await warmKeyAndContact();
      await keyBySql(key, (tx, id) => tx`update api_keys set scopes = array['contacts:write'] where id = ${id}`);
      expectProblem(await call('GET', `/v1/contacts/${contact}`, key), 403, 'permission_error');
      expect((await call('PATCH', `/v1/contacts/${contact}`, key, { attributes: { city: 'ok' } })).status).toBe(200);
      await keyBySql(key, (tx, id) => tx`update api_keys set secret_sha256 = sha256('other') where id = ${id}`);
      expectProblem(
        await call('PATCH', `/v1/contacts/${contact}`, key, { attributes: { city: 'no' } }),
        401,
        'authentication_error',
      );
    }
  });

  test('an attribute added by SQL is writable at once; one removed is refused at once', async () => {
    const key = await createKey(t.db.sql, t.accountId);
    const contact = await newContact(key);
    for (let i = 0; i < ROUNDS; i++) {
      await warm(key, `/v1/contacts/${contact}`);
      const name = `added_${i}`;
      await createAttribute(t.db.sql, t.accountId, name, 'number');
      const posted = await call('POST', '/v1/contacts', key, { email: fresh(), attributes: { [name]: '7' } });
      expect(posted.status).toBe(201);
      expect(posted.body.attributes[name]).toBe(7);
      const patched = await call('PATCH', `/v1/contacts/${contact}`, key, { attributes: { [name]: i } });
      expect(patched.status).toBe(200);
      expect(patched.body.attributes[name]).toBe(i);
      await bySql(
        t.accountId,
        'schema_attributes',
        (tx) => tx`delete from schema_attributes where account_id = ${t.accountId} and name = ${name}`,
      );
      expectProblem(
        await call('POST', '/v1/contacts', key, { email: fresh(), attributes: { [name]: 1 } }),
        400,
        'invalid_request_error',
      );
      expectProblem(
        await call('PATCH', `/v1/contacts/${contact}`, key, { attributes: { [name]: 1 } }),
        400,
        'invalid_request_error',
      );
    }
  });

  test('an attribute whose type is changed by SQL is read as the new type at once; GET renders it so', async () => {
    const key = await createKey(t.db.sql, t.accountId);
    await createAttribute(t.db.sql, t.accountId, 'flip', 'string');
    const contact = await newContact(key);
    for (let i = 0; i < ROUNDS; i++) {
      await warm(key, `/v1/contacts/${contact}`);
      const type = i % 2 ? 'string' : 'email';
      await bySql(
        t.accountId,
        'schema_attributes',
        (tx) => tx`update schema_attributes set type = ${type} where account_id = ${t.accountId} and name = 'flip'`,
      );
      const res = await call('PATCH', `/v1/contacts/${contact}`, key, { attributes: { flip: 'a@b.example' } });
      expect(res.status).toBe(200);
      // Email-type attributes come with derived keys; text attributes do not.
      expect('flip:domain' in res.body.attributes).toBe(type === 'email');
      expect('flip:domain' in (await call('GET', `/v1/contacts/${contact}`, key)).body.attributes).toBe(
        type === 'email',
      );
    }
  });
});

describe('notifications keep the caches fresh', () => {
  /** The backend that LISTENs for the counted app on its own node. */
  const listenerPid = async () =>
    (
      await node<{ pid: number }[]>`
      select pid from pg_stat_activity where datname = current_database() and query ilike 'listen%cache_invalidation%'`
    )[0]?.pid;

  test('a revoked key leaves the cache within a second, before any request, made on any node', async () => {
    const { key, contact } = await warmKeyAndContact();
    // Made on the coordinator (t.db.sql); on a Citus cluster the counted app is on a worker.
    await keyBySql(key, (tx, id) => tx`update api_keys set revoked_at = now() where id = ${id}`);
    // No request in between: one would drop the entry itself, once its statement saw the counter moved.
    await Bun.sleep(1_000);
    // The notification is in: the refusal costs only the key lookup, the cache no longer vouching
    // for the key, so no one-statement attempt is made first.
    const res = await call('GET', `/v1/contacts/${contact}`, key);
    expectProblem(res, 401, 'authentication_error');
    expect(res.sent).toHaveLength(1);
    expect(res.sent[0]).toContain('from api_keys');
  });

  test('after the listener reconnects the caches start empty', async () => {
    const { key, contact } = await warmKeyAndContact();
    const before = await listenerPid();
    expect(before).toBeDefined();
    await node`select pg_terminate_backend(${before!}::int)`;
    await until(async () => {
      const now = await listenerPid();
      return now !== undefined && now !== before;
    }, 'the listener reconnect');
    await until(
      async () => (await call('GET', `/v1/contacts/${contact}`, key)).sent.some((q) => q.includes('from api_keys')),
      'a full authentication',
    );
  });
});

describe('LiveCache', () => {
  test('serves nothing until live; entries expire; stale fills are discarded; groups drop together', async () => {
    const cache = new LiveCache<number>(50);
    cache.set('a', 1, cache.epoch);
    expect(cache.get('a')).toBeUndefined();
    cache.live = true;
    cache.set('a', 1, cache.epoch, 'g');
    cache.set('b', 2, cache.epoch, 'g');
    cache.set('c', 3, cache.epoch, 'h');
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([1, 2, 3]);
    cache.deleteGroup('g');
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([undefined, undefined, 3]);
    const epoch = cache.epoch;
    cache.delete('unrelated');
    cache.set('d', 4, epoch);
    expect(cache.get('d')).toBeUndefined();
    await Bun.sleep(60);
    expect(cache.get('c')).toBeUndefined();
  });
});

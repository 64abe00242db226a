// POST/GET/DELETE /v1/webhook-endpoints (issue 36): the endpoints the relay pushes an account's
// events to. Creation shows the signing secret once; reads show the delivery state instead.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { buildApp } from '../../src/app';
import { loadConfig } from '../../src/config';
import { connect } from '../../src/db';
import { MAX_ENDPOINTS_PER_ACCOUNT } from '../../src/webhooks/model';
import { URL_NOT_ALLOWED } from '../../src/webhooks/url-safety';
import { DOCS_URL, expectProblem, testApp, type Call, type TestApp } from '../helpers/app';
import { createAccount, createKey } from '../helpers/fixtures';

let t: TestApp;
/** The same database behind an app that allows private URLs (WEBHOOK_ALLOW_PRIVATE_URLS=true). */
let permissive: (method: string, path: string, body?: unknown, key?: string) => Promise<Call>;

beforeAll(async () => {
  t = await testApp({}, { WEBHOOK_ALLOW_PRIVATE_URLS: 'false' });
  const app = buildApp({
    ...t.deps,
    config: loadConfig({ DOCS_URL, DATA_DIR: '/tmp/contact-service-test', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }),
  });
  permissive = async (method, path, body, key = t.key) => {
    const res = await app.handle(
      new Request(`http://localhost${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
  };
});
afterAll(() => t.close());

const PUBLIC_URL = 'https://93.184.215.14/hooks/contacts';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A fresh account with a full-scope key, so each group of tests sees only its own endpoints. */
async function account() {
  const id = await createAccount(t.db.sql);
  const key = await createKey(t.db.sql, id);
  const call = (method: string, path: string, body?: unknown) => t.call(method, path, { key, body });
  const create = async (body: Record<string, unknown> = { url: PUBLIC_URL }) => {
    const res = await call('POST', '/v1/webhook-endpoints', body);
    if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as { id: string; url: string; secret: string; createdAt: string };
  };
  const count = async () =>
    (await t.db.sql<{ n: number }[]>`select count(*)::int as n from webhook_endpoints where account_id = ${id}`)[0]!.n;
  return { id, key, call, create, count };
}

/** Expects a 400 invalid_request_error with exactly one entry at `pointer`; returns its detail. */
function expect400(res: Call, pointer: string): string {
  const body = expectProblem(res, 400, 'invalid_request_error');
  expect(body.errors).toEqual([{ detail: expect.any(String), pointer }]);
  return body.errors[0].detail;
}

describe('POST /v1/webhook-endpoints', () => {
  test('201 with the endpoint and its secret, enabled, at the URL as normalised', async () => {
    const a = await account();
    const before = Date.now();
    const res = await a.call('POST', '/v1/webhook-endpoints', {
      url: 'HTTPS://93.184.215.14:8443/hooks/../in?x=1',
      description: 'CRM automations',
    });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body)).toEqual(['id', 'url', 'description', 'enabled', 'secret', 'createdAt']);
    expect(res.body).toEqual({
      id: expect.stringMatching(UUID),
      url: 'https://93.184.215.14:8443/in?x=1',
      description: 'CRM automations',
      enabled: true,
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      createdAt: expect.stringMatching(ISO),
    });
    expect(Date.parse(res.body.createdAt)).toBeGreaterThanOrEqual(before - 1000);
    expect(Buffer.from(res.body.secret.slice(6), 'base64')).toHaveLength(32);
  });

  test('without a description there is none in the answer', async () => {
    const a = await account();
    const res = await a.call('POST', '/v1/webhook-endpoints', { url: PUBLIC_URL });
    expect(res.status).toBe(201);
    expect('description' in res.body).toBe(false);
    expect(res.body.url).toBe(PUBLIC_URL);
  });

  test('every endpoint gets a secret of its own', async () => {
    const a = await account();
    const secrets = new Set<string>();
    for (let i = 0; i < 5; i++) secrets.add((await a.create()).secret);
    expect(secrets.size).toBe(5);
  });

  test('the secret is a Standard Webhooks secret: standardwebhooks verifies an HMAC-SHA256 of its bytes', async () => {
    const { secret } = await (await account()).create();
    const id = 'msg_2KWPBgLlAfxdpx2AI54pPJ85f1W';
    const timestamp = new Date();
    const seconds = Math.floor(timestamp.getTime() / 1000);
    const payload = JSON.stringify({ type: 'events', timestamp: timestamp.toISOString(), data: [] });
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const signature = createHmac('sha256', key).update(`${id}.${seconds}.${payload}`).digest('base64');
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(seconds), 'webhook-signature': `v1,${signature}` };
    const wh = new Webhook(secret);
    expect(wh.verify(payload, headers)).toEqual(JSON.parse(payload));
    expect(wh.sign(id, timestamp, payload)).toBe(`v1,${signature}`);
    const other = new Webhook((await (await account()).create()).secret);
    expect(() => other.verify(payload, headers)).toThrow();
  });

  test("the endpoint starts at its account's head: only later events are pending for it", async () => {
    const a = await account();
    const first = await a.create();
    await t.db.sql`insert into event_feed_heads (account_id, sequenced_through) values (${a.id}, 42)`;
    const second = await a.create();
    const rows = await t.db.sql<{ id: string; delivered_position: number; delivered_index: number }[]>`
      select id, delivered_position, delivered_index from webhook_endpoints where account_id = ${a.id}`;
    const byId = new Map(rows.map((r) => [r.id, r]));
    // The place before every event after the head (src/events/cursor.ts `after`).
    expect(byId.get(first.id)).toMatchObject({ delivered_position: 1, delivered_index: 0 });
    expect(byId.get(second.id)).toMatchObject({ delivered_position: 43, delivered_index: 0 });
  });

  test(`an account has at most ${MAX_ENDPOINTS_PER_ACCOUNT} endpoints: one more is 409 conflict_error`, async () => {
    const a = await account();
    const ids: string[] = [];
    for (let i = 0; i < MAX_ENDPOINTS_PER_ACCOUNT; i++) ids.push((await a.create()).id);
    const refused = await a.call('POST', '/v1/webhook-endpoints', { url: PUBLIC_URL });
    expect(expectProblem(refused, 409, 'conflict_error').detail).toContain(String(MAX_ENDPOINTS_PER_ACCOUNT));
    expect(await a.count()).toBe(MAX_ENDPOINTS_PER_ACCOUNT);
    // Another account is not affected, and a deletion makes room.
    await (await account()).create();
    expect((await a.call('DELETE', `/v1/webhook-endpoints/${ids[0]}`)).status).toBe(204);
    await a.create();
    expect(await a.count()).toBe(MAX_ENDPOINTS_PER_ACCOUNT);
  });

  test('concurrent creates never pass the cap', async () => {
    const a = await account();
    const results = await Promise.all(
      Array.from({ length: MAX_ENDPOINTS_PER_ACCOUNT + 6 }, () =>
        a.call('POST', '/v1/webhook-endpoints', { url: PUBLIC_URL }),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(MAX_ENDPOINTS_PER_ACCOUNT);
    expect(statuses.filter((s) => s === 409)).toHaveLength(6);
    expect(await a.count()).toBe(MAX_ENDPOINTS_PER_ACCOUNT);
  });
});

describe('POST /v1/webhook-endpoints: the body (400 invalid_request_error with a pointer)', () => {
  const post = (a: Awaited<ReturnType<typeof account>>, body: unknown) => a.call('POST', '/v1/webhook-endpoints', body);

  test('a body that is not a JSON object points at the whole body', async () => {
    const a = await account();
    for (const body of [[], 'https://example.com/', 42, null, [PUBLIC_URL]]) expect400(await post(a, body), '');
    expectProblem(
      await t.call('POST', '/v1/webhook-endpoints', {
        key: a.key,
        raw: '{"url":',
        headers: { 'content-type': 'application/json' },
      }),
      400,
      'invalid_request_error',
    );
    expectProblem(
      await t.call('POST', '/v1/webhook-endpoints', {
        key: a.key,
        raw: `url=${PUBLIC_URL}`,
        headers: { 'content-type': 'text/plain' },
      }),
      400,
      'invalid_request_error',
    );
    expectProblem(await t.call('POST', '/v1/webhook-endpoints', { key: a.key }), 400, 'invalid_request_error');
    expect(await a.count()).toBe(0);
  });

  test('an unknown field is refused, naming it', async () => {
    const a = await account();
    const res = await post(a, { url: PUBLIC_URL, secret: 'whsec_mine', enabled: false });
    const body = expectProblem(res, 400, 'invalid_request_error');
    expect(body.errors).toEqual([
      { detail: 'Unknown field secret.', pointer: '/secret' },
      { detail: 'Unknown field enabled.', pointer: '/enabled' },
    ]);
    expect(body.detail).toContain('Accepted fields: url, description');
    expect(await a.count()).toBe(0);
  });

  test('url is required and must be a string of at most 2048 characters', async () => {
    const a = await account();
    expect400(await post(a, {}), '/url');
    expect400(await post(a, { description: 'no url' }), '/url');
    for (const url of [42, null, true, [PUBLIC_URL], { href: PUBLIC_URL }]) expect400(await post(a, { url }), '/url');
    const long = `https://93.184.215.14/${'a'.repeat(2048)}`;
    expect(expect400(await post(a, { url: long }), '/url')).toBe('url must be a string of at most 2048 characters.');
    expect((await post(a, { url: `https://93.184.215.14/${'a'.repeat(2048 - 23)}` })).status).toBe(201);
    // Within the limit as sent, over it once percent-encoded: the stored URL is bounded too.
    const grows = `https://93.184.215.14/${'é'.repeat(1000)}`;
    expect(expect400(await post(a, { url: grows }), '/url')).toContain('once normalised');
    expect(await a.count()).toBe(1);
  });

  test('description must be a string of at most 500 characters that PostgreSQL can store', async () => {
    const a = await account();
    for (const description of [42, null, false, ['x'], { text: 'x' }])
      expect400(await post(a, { url: PUBLIC_URL, description }), '/description');
    expect(expect400(await post(a, { url: PUBLIC_URL, description: 'x'.repeat(501) }), '/description')).toBe(
      'description must be a string of at most 500 characters.',
    );
    for (const description of ['nul \u0000 inside', 'lone \ud800 surrogate'])
      expect400(await post(a, { url: PUBLIC_URL, description }), '/description');
    expect(await a.count()).toBe(0);
    const ok = await post(a, { url: PUBLIC_URL, description: 'ü'.repeat(500) });
    expect(ok.status).toBe(201);
    expect(ok.body.description).toBe('ü'.repeat(500));
  });

  test('a URL that is not an absolute http(s) URL is refused at /url, saying why', async () => {
    const a = await account();
    const cases: [string, string][] = [
      ['', 'not a valid absolute URL'],
      ['hooks.example.com/in', 'not a valid absolute URL'],
      ['/relative', 'not a valid absolute URL'],
      ['https://exa mple.com/', 'not a valid absolute URL'],
      ['ftp://93.184.215.14/', 'scheme must be http or https, not ftp'],
      ['javascript:alert(1)', 'scheme must be http or https, not javascript'],
      ['file:///etc/passwd', 'scheme must be http or https, not file'],
      ['https://user:secret@93.184.215.14/', 'must not contain credentials'],
      ['https://token@93.184.215.14/', 'must not contain credentials'],
      ['https://93.184.215.14:0/', 'port 0'],
    ];
    for (const [url, why] of cases) {
      expect({ url, detail: expect400(await post(a, { url }), '/url') }).toEqual({
        url,
        detail: expect.stringContaining(why),
      });
    }
    expect(await a.count()).toBe(0);
  });

  // One answer for every host the API will not call, so that a caller cannot tell an internal name
  // that resolves from one that does not (issue 60).
  test('a host that is or resolves to a non-public address is refused at /url, saying only that', async () => {
    const a = await account();
    for (const url of [
      'http://127.0.0.1:3000/hook',
      'http://2130706433/hook',
      'http://0x7f.1/hook',
      'http://[::1]/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://localhost:3000/hook',
      'http://0.0.0.0/',
      'http://10.1.2.3/',
      'http://172.20.0.1/',
      'http://192.168.0.10/',
      'http://[fd00::1]/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[fe80::1]/',
      'http://100.64.0.1/',
      'http://224.0.0.1/',
      'http://255.255.255.255/',
    ]) {
      expect({ url, detail: expect400(await post(a, { url }), '/url') }).toEqual({ url, detail: URL_NOT_ALLOWED });
    }
    expect(await a.count()).toBe(0);
  });

  test('a host that does not resolve is refused at /url with the same words', async () => {
    const a = await account();
    expect(expect400(await post(a, { url: 'https://no-such-host.invalid/hook' }), '/url')).toBe(URL_NOT_ALLOWED);
  });

  test('with WEBHOOK_ALLOW_PRIVATE_URLS=true private addresses are accepted; the rest still is not', async () => {
    const a = await account();
    for (const url of [
      'http://localhost:3000/hook',
      'http://127.0.0.1:3000/hook',
      'http://[::1]:8080/',
      'http://10.0.0.5/',
    ]) {
      const res = await permissive('POST', '/v1/webhook-endpoints', { url }, a.key);
      expect({ url, status: res.status }).toEqual({ url, status: 201 });
    }
    for (const [url, pointer] of [
      ['https://no-such-host.invalid/', '/url'],
      ['ftp://127.0.0.1/', '/url'],
      ['http://user:pw@localhost/', '/url'],
    ]) {
      const res = await permissive('POST', '/v1/webhook-endpoints', { url }, a.key);
      expect({ url, status: res.status, errors: res.body.errors }).toEqual({
        url,
        status: 400,
        errors: [{ detail: expect.any(String), pointer }],
      });
    }
  });
});

describe('GET /v1/webhook-endpoints', () => {
  test('newest first, without secrets, in pages', async () => {
    const a = await account();
    const made: string[] = [];
    for (let i = 0; i < 12; i++) made.push((await a.create({ url: `${PUBLIC_URL}/${i}`, description: `#${i}` })).id);
    const res = await a.call('GET', '/v1/webhook-endpoints');
    expect(res.status).toBe(200);
    expect(res.body.pagination).toEqual({ page: 1, pageSize: 200, totalCount: 12, totalPages: 1 });
    expect(res.body.data.map((e: { id: string }) => e.id)).toEqual([...made].reverse());
    expect(res.body.data[0]).toEqual({
      id: made[11],
      url: `${PUBLIC_URL}/11`,
      description: '#11',
      enabled: true,
      createdAt: expect.stringMatching(ISO),
    });
    expect(JSON.stringify(res.body)).not.toContain('whsec_');

    const page1 = await a.call('GET', '/v1/webhook-endpoints?pageSize=10');
    const page2 = await a.call('GET', '/v1/webhook-endpoints?pageSize=10&page=2');
    expect(page1.body.pagination).toEqual({ page: 1, pageSize: 10, totalCount: 12, totalPages: 2 });
    expect(page2.body.pagination).toEqual({ page: 2, pageSize: 10, totalCount: 12, totalPages: 2 });
    expect([...page1.body.data, ...page2.body.data].map((e: { id: string }) => e.id)).toEqual([...made].reverse());
    const past = await a.call('GET', '/v1/webhook-endpoints?pageSize=10&page=3');
    expect(past.body).toEqual({ data: [], pagination: { page: 3, pageSize: 10, totalCount: 12, totalPages: 2 } });
  });

  test('an account without endpoints lists none', async () => {
    const res = await (await account()).call('GET', '/v1/webhook-endpoints');
    expect(res.body).toEqual({ data: [], pagination: { page: 1, pageSize: 200, totalCount: 0, totalPages: 0 } });
  });

  test("another account's endpoints are not listed", async () => {
    const a = await account();
    const b = await account();
    await a.create();
    expect((await b.call('GET', '/v1/webhook-endpoints')).body.data).toEqual([]);
  });

  test('page and pageSize as every list: out of range, malformed, repeated or unknown parameters are 400', async () => {
    const a = await account();
    for (const [query, parameter] of [
      ['page=0', 'page'],
      ['page=x', 'page'],
      ['pageSize=9', 'pageSize'],
      ['pageSize=201', 'pageSize'],
      ['pageSize=1e1', 'pageSize'],
      ['page=1&page=2', 'page'],
      ['sort=url', 'sort'],
      ['enabled=true', 'enabled'],
    ]) {
      const res = await a.call('GET', `/v1/webhook-endpoints?${query}`);
      const body = expectProblem(res, 400, 'invalid_request_error');
      expect({ query, errors: body.errors }).toEqual({ query, errors: [{ detail: expect.any(String), parameter }] });
    }
  });

  test('a disabled endpoint is listed with enabled false and its reason', async () => {
    const a = await account();
    const { id } = await a.create();
    await t.db.sql`
      update webhook_endpoints set enabled = false, disabled_reason = 'Every attempt failed for 3 days.'
      where account_id = ${a.id} and id = ${id}`;
    const [listed] = (await a.call('GET', '/v1/webhook-endpoints')).body.data;
    expect(listed).toMatchObject({ id, enabled: false, disabledReason: 'Every attempt failed for 3 days.' });
  });
});

describe('GET /v1/webhook-endpoints/{id}', () => {
  test('the endpoint without its secret, with its delivery state', async () => {
    const a = await account();
    const created = await a.create({ url: PUBLIC_URL, description: 'to the CRM' });
    const res = await a.call('GET', `/v1/webhook-endpoints/${created.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: created.id,
      url: PUBLIC_URL,
      description: 'to the CRM',
      enabled: true,
      createdAt: created.createdAt,
      delivery: { pendingEvents: 0 },
    });
    expect(JSON.stringify(res.body)).not.toContain(created.secret);
  });

  test('delivery shows the last success, the last failure and its reason, the retry of a batch in flight', async () => {
    const a = await account();
    const { id } = await a.create();
    const at = (iso: string) => new Date(iso);
    await t.db.sql`
      update webhook_endpoints set
        last_success_at = ${at('2026-01-01T10:00:00.000Z')}, last_failure_at = ${at('2026-01-01T11:00:00.000Z')},
        last_failure_reason = 'HTTP 500', failing_since = ${at('2026-01-01T10:30:00.000Z')},
        batch_id = 'msg_1', next_attempt_at = ${at('2026-01-01T11:00:05.000Z')}
      where account_id = ${a.id} and id = ${id}`;
    const get = async () => (await a.call('GET', `/v1/webhook-endpoints/${id}`)).body;
    expect((await get()).delivery).toEqual({
      pendingEvents: 0,
      lastSuccessAt: '2026-01-01T10:00:00.000Z',
      lastFailureAt: '2026-01-01T11:00:00.000Z',
      lastFailureReason: 'HTTP 500',
      failingSince: '2026-01-01T10:30:00.000Z',
      nextAttemptAt: '2026-01-01T11:00:05.000Z',
    });
    // No batch in flight: nothing is scheduled to be sent again.
    await t.db.sql`update webhook_endpoints set batch_id = null where account_id = ${a.id} and id = ${id}`;
    expect((await get()).delivery.nextAttemptAt).toBeUndefined();
    // Disabled: says why, and no retry is scheduled whatever the row holds.
    await t.db.sql`
      update webhook_endpoints set enabled = false, disabled_reason = 'Every attempt failed for 3 days.',
        batch_id = 'msg_2'
      where account_id = ${a.id} and id = ${id}`;
    const disabled = await get();
    expect(disabled).toMatchObject({ enabled: false, disabledReason: 'Every attempt failed for 3 days.' });
    expect(disabled.delivery.nextAttemptAt).toBeUndefined();
  });

  describe("pendingEvents: the events after the endpoint's cursor (position, then place in the set)", () => {
    const md5 = (n: number) => `${n.toString(16).padStart(8, '0')}-0000-4000-8000-000000000000`;
    let a: Awaited<ReturnType<typeof account>>;
    let id: string;
    const brand = '00000000-0000-4000-8000-00000000b0a0';

    /** A set at `position` (null: not sequenced yet) of these md5s, a null standing for an erased address. */
    const set = async (accountId: string, position: number | null, md5s: (string | null)[]) => {
      await t.db.sql`
        insert into brand_subscribe_events (account_id, email_md5s, emails, brand_id, source, position)
        values (${accountId}, ${md5s}::uuid[], ${md5s.map((m) => m && `${m}@example.com`)}::text[], ${brand}, 'api',
                ${position})`;
    };
    const events = (n: number) => Array.from({ length: n }, (_, i) => md5(i + 1));
    /** pendingEvents with the cursor at (position, index): `index` events of that position passed. */
    const pendingAt = async (position: number, index: number) => {
      await t.db.sql`
        update webhook_endpoints set delivered_position = ${position}, delivered_index = ${index}
        where account_id = ${a.id} and id = ${id}`;
      const res = await a.call('GET', `/v1/webhook-endpoints/${id}`);
      expect(res.status).toBe(200);
      return res.body.delivery.pendingEvents as number;
    };

    beforeAll(async () => {
      a = await account();
      id = (await a.create()).id;
      await set(a.id, 1, events(3));
      await set(a.id, 2, [md5(1), md5(2), null, md5(4), md5(5)]); // the third address erased
      await set(a.id, 3, events(1));
      await set(a.id, 5, events(2)); // positions need not be dense for the count
      await set(a.id, null, events(7)); // not sequenced yet: not in the feed
      const other = await account();
      await set(other.id, 4, events(100));
      await set(other.id, 6, events(100));
    });

    test('a new endpoint of an account without a head: every sequenced event of the account', async () => {
      expect((await a.call('GET', `/v1/webhook-endpoints/${id}`)).body.delivery.pendingEvents).toBe(3 + 4 + 1 + 2);
      expect(await pendingAt(0, 0)).toBe(3 + 4 + 1 + 2);
    });

    test('at the start of a position: that set and the later ones, without the erased address', async () => {
      expect(await pendingAt(1, 0)).toBe(3 + 4 + 1 + 2);
      expect(await pendingAt(2, 0)).toBe(4 + 1 + 2);
      expect(await pendingAt(3, 0)).toBe(1 + 2);
      expect(await pendingAt(6, 0)).toBe(0);
      expect(await pendingAt(99, 0)).toBe(0);
    });

    test('part of a set passed: the rest of it, then the later positions', async () => {
      expect(await pendingAt(1, 1)).toBe(2 + 4 + 1 + 2);
      expect(await pendingAt(2, 1)).toBe(3 + 1 + 2);
      expect(await pendingAt(2, 2)).toBe(2 + 1 + 2);
      expect(await pendingAt(2, 3)).toBe(2 + 1 + 2);
      expect(await pendingAt(2, 4)).toBe(1 + 1 + 2);
      expect(await pendingAt(2, 5)).toBe(0 + 1 + 2);
      expect(await pendingAt(5, 1)).toBe(1);
      expect(await pendingAt(5, 2)).toBe(0);
    });

    test('a cursor on a position without a set (pruned, or never given) counts the later ones', async () => {
      expect(await pendingAt(4, 0)).toBe(2);
      expect(await pendingAt(4, 7)).toBe(2);
    });
  });

  test('a malformed id is 400 naming the parameter', async () => {
    const a = await account();
    for (const bad of [
      'nope',
      '1234',
      'urn:uuid:00000000-0000-4000-8000-000000000000',
      '00000000-0000-4000-8000-00000000000g',
    ]) {
      for (const method of ['GET', 'DELETE']) {
        const body = expectProblem(await a.call(method, `/v1/webhook-endpoints/${bad}`), 400, 'invalid_request_error');
        expect(body.errors).toEqual([{ detail: 'id must be a UUID.', parameter: 'id' }]);
      }
    }
  });

  test("no such endpoint, or another account's, is 404 not_found_error", async () => {
    const a = await account();
    const b = await account();
    const theirs = (await b.create()).id;
    for (const id of [crypto.randomUUID(), theirs]) {
      expectProblem(await a.call('GET', `/v1/webhook-endpoints/${id}`), 404, 'not_found_error');
      expectProblem(await a.call('DELETE', `/v1/webhook-endpoints/${id}`), 404, 'not_found_error');
    }
    // Untouched by the attempts.
    expect((await b.call('GET', `/v1/webhook-endpoints/${theirs}`)).status).toBe(200);
  });

  test('an upper-case id finds the endpoint', async () => {
    const a = await account();
    const { id } = await a.create();
    expect((await a.call('GET', `/v1/webhook-endpoints/${id.toUpperCase()}`)).body.id).toBe(id);
  });

  test('query parameters are refused: the route takes none', async () => {
    const a = await account();
    const { id } = await a.create();
    const body = expectProblem(
      await a.call('GET', `/v1/webhook-endpoints/${id}?expand=secret`),
      400,
      'invalid_request_error',
    );
    expect(body.errors).toEqual([{ detail: expect.any(String), parameter: 'expand' }]);
  });
});

describe('DELETE /v1/webhook-endpoints/{id}', () => {
  test('204 without a body; the endpoint is gone, a second delete is 404', async () => {
    const a = await account();
    const { id } = await a.create();
    const keep = await a.create();
    const res = await a.call('DELETE', `/v1/webhook-endpoints/${id}`);
    expect(res.status).toBe(204);
    expect(res.body).toBeUndefined();
    expectProblem(await a.call('GET', `/v1/webhook-endpoints/${id}`), 404, 'not_found_error');
    expectProblem(await a.call('DELETE', `/v1/webhook-endpoints/${id}`), 404, 'not_found_error');
    expect((await a.call('GET', '/v1/webhook-endpoints')).body.data.map((e: { id: string }) => e.id)).toEqual([
      keep.id,
    ]);
  });
});

describe('Authentication and scopes', () => {
  test('every route needs a key: 401 with WWW-Authenticate: Bearer', async () => {
    const a = await account();
    const { id } = await a.create();
    for (const [method, path, body] of [
      ['GET', '/v1/webhook-endpoints'],
      ['POST', '/v1/webhook-endpoints', { url: PUBLIC_URL }],
      ['GET', `/v1/webhook-endpoints/${id}`],
      ['DELETE', `/v1/webhook-endpoints/${id}`],
    ] as const) {
      const res = await t.call(method, path, { key: null, body });
      expectProblem(res, 401, 'authentication_error');
      expect(res.headers.get('www-authenticate') ?? '').toMatch(/^Bearer\b/);
    }
    expect(await a.count()).toBe(1);
  });

  test('reads need webhooks:read, writes webhooks:write: without it 403 naming the scope', async () => {
    const a = await account();
    const { id } = await a.create();
    const readOnly = await createKey(t.db.sql, a.id, ['webhooks:read']);
    const writeOnly = await createKey(t.db.sql, a.id, ['webhooks:write']);
    const neither = await createKey(t.db.sql, a.id, ['contacts:read', 'contacts:write', 'events:read']);
    const routes = [
      { method: 'GET', path: '/v1/webhook-endpoints', scope: 'webhooks:read' },
      { method: 'GET', path: `/v1/webhook-endpoints/${id}`, scope: 'webhooks:read' },
      { method: 'POST', path: '/v1/webhook-endpoints', scope: 'webhooks:write', body: { url: PUBLIC_URL } },
      { method: 'DELETE', path: `/v1/webhook-endpoints/${crypto.randomUUID()}`, scope: 'webhooks:write' },
    ];
    for (const r of routes) {
      const lacking = r.scope === 'webhooks:read' ? [writeOnly, neither] : [readOnly, neither];
      for (const key of lacking) {
        const res = await t.call(r.method, r.path, { key, body: r.body });
        const problem = expectProblem(res, 403, 'permission_error');
        expect(problem.detail).toContain(r.scope);
      }
      const only = r.scope === 'webhooks:read' ? readOnly : writeOnly;
      const ok = await t.call(r.method, r.path, { key: only, body: r.body });
      expect({ route: `${r.method} ${r.path}`, status: ok.status }).toEqual({
        route: `${r.method} ${r.path}`,
        status: r.method === 'POST' ? 201 : r.method === 'DELETE' ? 404 : 200,
      });
    }
  });

  test('order of checks: a bad key is 401 and a missing scope 403 before a malformed body or id', async () => {
    const a = await account();
    const readOnly = await createKey(t.db.sql, a.id, ['webhooks:read']);
    expectProblem(
      await t.call('POST', '/v1/webhook-endpoints', { key: 'ck_nope', body: { url: 1 } }),
      401,
      'authentication_error',
    );
    expectProblem(
      await t.call('POST', '/v1/webhook-endpoints', { key: readOnly, body: { url: 1 } }),
      403,
      'permission_error',
    );
    expectProblem(await t.call('DELETE', '/v1/webhook-endpoints/nope', { key: readOnly }), 403, 'permission_error');
    const writeOnly = await createKey(t.db.sql, a.id, ['webhooks:write']);
    expectProblem(await t.call('GET', '/v1/webhook-endpoints?page=0', { key: writeOnly }), 403, 'permission_error');
    expect(await a.count()).toBe(0);
  });
});

describe('on a Citus cluster (the second pass of test/run.ts)', () => {
  /** The statement with its parameters written in: Citus cannot EXPLAIN an INSERT … SELECT with them. */
  const inline = (query: string, params: unknown[]) =>
    query.replace(/\$(\d+)/g, (_, k: string) => {
      const v = params[Number(k) - 1];
      return v === null ? 'null' : `'${String(v).replaceAll("'", "''")}'`;
    });

  test("every statement of the four routes runs on the account's node alone", async () => {
    const [citus] = await t.db.sql`select 1 from pg_extension where extname = 'citus'`;
    if (!citus) return; // one PostgreSQL: nothing to route
    const sent: { query: string; params: unknown[] }[] = [];
    const sql = connect(t.db.url, 2, { debug: (_c, query, params) => sent.push({ query, params }) });
    try {
      const app = buildApp({ ...t.deps, sql });
      const a = await account();
      const call = async (method: string, path: string, body?: unknown) => {
        const headers: Record<string, string> = { authorization: `Bearer ${a.key}` };
        if (body !== undefined) headers['content-type'] = 'application/json';
        const init = { method, headers, body: body === undefined ? undefined : JSON.stringify(body) };
        return (await app.handle(new Request(`http://localhost${path}`, init))).status;
      };
      const created = await a.create();
      expect(await call('POST', '/v1/webhook-endpoints', { url: PUBLIC_URL })).toBe(201);
      expect(await call('GET', '/v1/webhook-endpoints')).toBe(200);
      expect(await call('GET', '/v1/webhook-endpoints?page=9&pageSize=10')).toBe(200);
      expect(await call('GET', `/v1/webhook-endpoints/${created.id}`)).toBe(200);
      expect(await call('DELETE', `/v1/webhook-endpoints/${created.id}`)).toBe(204);
      const ours = sent.filter((s) => /\bwebhook_endpoints\b/.test(s.query));
      expect(ours.length).toBe(6); // the insert, two lists (past the end: a count too), the get, the delete
      for (const s of ours) {
        const rows = await sql.unsafe<{ 'QUERY PLAN': string }[]>(`explain (costs off) ${inline(s.query, s.params)}`);
        const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
        expect({ query: s.query, plan }).toEqual({ query: s.query, plan: expect.stringMatching(/Task Count: 1\n/) });
        expect(plan).not.toMatch(/Distributed Subplan|repartition/i);
        // The create's INSERT … SELECT (no source table to push it down with) reads on the account's node
        // and inserts its one row there through the coordinator: the same node, no two-phase commit.
        const pulled = /pull to coordinator/.test(plan);
        expect({ query: s.query, pulled }).toEqual({ query: s.query, pulled: /^\s*insert/.test(s.query) });
      }
    } finally {
      await sql.end();
    }
  });
});

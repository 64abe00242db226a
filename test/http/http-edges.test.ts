// The HTTP edges of the served API (src/http/server.ts, as src/index.ts runs it), over real sockets:
// Host handling, methods, framing and header size, strict query integers, unknown query parameters on
// every /v1 route, UTF-8 bodies, and the one spelling of an upload token.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { buildApp } from '../../src/app';
import { ROUTES_WITH_QUERY } from '../../src/http/query-rules';
import { DOCS_URL } from '../helpers/app';
import { httpRequest, problemOf, serveTestApi, type RawAnswer, type ServedApi } from '../helpers/api-server';
import { createAttribute, createBrand, createSuppressionList } from '../helpers/fixtures';

let api: ServedApi;
let brandId: string;
let listId: string;
const MD5 = '0123456789abcdef0123456789abcdef';
const UUID = '00000000-0000-4000-8000-000000000000';

beforeAll(async () => {
  api = await serveTestApi();
  brandId = await createBrand(api.db.sql, api.accountId, 'Edge brand');
  listId = await createSuppressionList(api.db.sql, api.accountId, 'Edge list', 'plain text');
  await createAttribute(api.db.sql, api.accountId, 'firstName', 'string');
});
afterAll(() => api.close());

const auth = () => ({ Authorization: `Bearer ${api.key}` });
const get = (target: string, host?: string | null) => api.raw(httpRequest('GET', target, { host, headers: auth() }));

function expectProblem(answer: RawAnswer, status: number, code: string): any {
  const body = problemOf(answer);
  if (
    answer.status !== status ||
    body?.code !== code ||
    body?.status !== status ||
    body?.type !== `${DOCS_URL}/error-codes#${code}`
  ) {
    throw new Error(
      `expected ${status} ${code} problem, got ${answer.status} ${answer.headers.get('content-type')} ` +
        answer.body.slice(0, 300),
    );
  }
  return body;
}

describe('Host header', () => {
  test('a request without a Host header (HTTP/1.0) is answered by the app, not a 500 page', async () => {
    const health = await api.raw(httpRequest('GET', '/healthz', { host: null, version: 'HTTP/1.0' }));
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body)).toEqual({ status: 'ok' });
    const unauth = expectProblem(
      await api.raw(httpRequest('GET', '/v1/brands', { host: null, version: 'HTTP/1.0' })),
      401,
      'authentication_error',
    );
    expect(unauth.instance).toBe('/v1/brands');
    const listed = await api.raw(
      httpRequest('GET', '/v1/brands', { host: null, version: 'HTTP/1.0', headers: auth() }),
    );
    expect(listed.status).toBe(200);
    expectProblem(
      await api.raw(httpRequest('GET', '/nowhere', { host: null, version: 'HTTP/1.0' })),
      404,
      'not_found_error',
    );
  });

  test('routing does not depend on the Host value: empty, short, odd or foreign', async () => {
    for (const host of [
      '',
      'x',
      'x.y',
      'a.b',
      '[::1]',
      'localhost:1',
      'api.example.com',
      'a?b',
      'a#b',
      'a/b',
      'LOCALHOST',
    ]) {
      const listed = await get('/v1/brands?pageSize=10', host);
      expect({ host, status: listed.status }).toEqual({ host, status: 200 });
      expect(JSON.parse(listed.body).data.map((b: { id: string }) => b.id)).toEqual([brandId]);
      const one = await get(`/v1/brands/${brandId}`, host);
      expect({ host, status: one.status }).toEqual({ host, status: 200 });
      const missing = expectProblem(await get(`/v1/brands/${UUID}`, host), 404, 'not_found_error');
      expect(missing.instance).toBe(`/v1/brands/${UUID}`);
    }
  });

  test('an absolute-form request target is routed by its path, whatever host it names', async () => {
    const res = await get('http://x/v1/brands?pageSize=10');
    expect(res.status).toBe(200);
  });
});

describe('Methods', () => {
  test('methods the runtime passes on but no route takes are a 404 problem', async () => {
    for (const method of ['PROPFIND', 'TRACE', 'QUERY', 'M-SEARCH', 'PURGE', 'MKCOL', 'CONNECT', 'OPTIONS']) {
      const body = expectProblem(
        await api.raw(httpRequest(method, '/v1/brands', { headers: auth() })),
        404,
        'not_found_error',
      );
      expect(body.detail).toContain('No such route');
    }
  });

  // Bun's HTTP parser closes the connection on a method it does not know (RFC 9110 methods are
  // case-sensitive, so `get` is one): the app is never called. Pinned so that a runtime that starts
  // passing them on is noticed (they would then need the 404 above).
  test('methods the runtime does not know never reach the app: the runtime closes the connection', async () => {
    for (const method of ['get', 'Get', 'FOO', 'BREW']) {
      const res = await api.raw(httpRequest(method, '/v1/brands', { headers: auth() }));
      expect({ method, bytes: res.bytes }).toEqual({ method, bytes: 0 });
    }
  });
});

describe('Framing and header size (answered by the runtime before the app)', () => {
  test('broken framing is a 400 and the connection is closed; never a 5xx', async () => {
    const cases = [
      httpRequest('POST', '/v1/contacts', {
        headers: { ...auth(), 'Content-Length': '5', 'Transfer-Encoding': 'chunked' },
        body: '0\r\n\r\n',
      }),
      httpRequest('POST', '/v1/contacts', { headers: { ...auth(), 'Content-Length': 'abc' }, body: '{}' }),
      httpRequest('POST', '/v1/contacts', {
        headers: { ...auth(), 'Content-Length': '2', 'content-length': '3' },
        body: '{}',
      }),
      httpRequest('POST', '/v1/contacts', {
        headers: { ...auth(), 'Transfer-Encoding': 'chunked' },
        body: 'zz\r\n{}\r\n0\r\n\r\n',
      }),
      httpRequest('GET', '/v1/brands', { host: null }),
      Buffer.from('HELLO\r\n\r\n'),
      Buffer.from('GET /v1/brands HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n'),
    ];
    for (const request of cases) {
      const res = await api.raw(request);
      expect(res.status).toBe(400);
    }
  });

  test('oversized headers and request lines are a 431', async () => {
    expect(
      (await api.raw(httpRequest('GET', '/v1/brands', { headers: { ...auth(), 'X-Big': 'a'.repeat(100_000) } })))
        .status,
    ).toBe(431);
    expect((await api.raw(httpRequest('GET', `/v1/brands/${'a'.repeat(100_000)}`, { headers: auth() }))).status).toBe(
      431,
    );
  });
});

describe('Query integers are plain decimal digits', () => {
  const lists = () => [
    '/v1/brands',
    '/v1/suppression-lists',
    `/v1/suppression-lists/${listId}/imports`,
    '/v1/contact-imports',
  ];
  for (const value of ['0x10', '1e1', '%2B1', '%201', '1%20', '1.0', '0b1', '1_0', '１']) {
    test(`${value} is a 400 naming the parameter on every list endpoint`, async () => {
      for (const path of lists()) {
        for (const parameter of ['page', 'pageSize']) {
          const body = expectProblem(
            await get(`${path}?${parameter}=${encodeURI(value).replaceAll('%25', '%')}`),
            400,
            'invalid_request_error',
          );
          expect({ path, errors: body.errors }).toEqual({ path, errors: [{ detail: expect.any(String), parameter }] });
        }
      }
    });
  }

  test('decimal digits within bounds are read as such (leading zeros included)', async () => {
    for (const path of lists()) {
      const res = await get(`${path}?page=01&pageSize=010`);
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
      expect(JSON.parse(res.body).pagination).toMatchObject({ page: 1, pageSize: 10 });
    }
  });
});

describe('Unknown query parameters on every /v1 route', () => {
  test('the routes left to check their own query are exactly those that declare a query schema', () => {
    const app = buildApp(api.deps);
    const declared = app.routes
      .filter((r) => (r.hooks as { query?: unknown } | undefined)?.query)
      .map((r) => `${r.method} ${r.path}`);
    expect(new Set(declared)).toEqual(new Set(ROUTES_WITH_QUERY));
  });

  test('a route that takes no query parameters refuses any, naming it, after the key is checked', async () => {
    const routes: Array<[string, string, string?]> = [
      ['GET', '/v1/contact-schema'],
      ['GET', `/v1/brands/${brandId}`],
      ['GET', `/v1/suppression-lists/${listId}`],
      ['POST', `/v1/suppression-lists/${listId}/records`, '{"records":["a@example.com"]}'],
      ['GET', `/v1/suppression-lists/${listId}/imports/${UUID}`],
      ['GET', `/v1/contact-imports/${UUID}`],
      ['POST', '/v1/contact-imports', '{"columns":["Email"],"duplicateContactStrategy":"overwrite"}'],
      ['POST', '/v1/contacts', '{"email":"q@example.com"}'],
      ['GET', `/v1/contacts/${MD5}`],
      ['PATCH', `/v1/contacts/${MD5}`, '{"attributes":{}}'],
      ['POST', `/v1/contacts/${MD5}/disable`],
      ['GET', `/v1/contacts/${MD5}/brands`],
      ['POST', `/v1/contacts/${MD5}/brands`, `{"brandIds":["${UUID}"]}`],
      ['DELETE', `/v1/contacts/${MD5}/brands/${brandId}`],
      ['GET', `/v1/contacts/${MD5}/subscriptions`],
      ['POST', `/v1/contacts/${MD5}/subscriptions`, `{"brandIds":["${UUID}"]}`],
      ['DELETE', `/v1/contacts/${MD5}/subscriptions/${brandId}`],
    ];
    for (const [method, path, body] of routes) {
      const headers = { ...auth(), ...(body && { 'Content-Type': 'application/json' }) };
      const res = await api.raw(httpRequest(method, `${path}?fields=email`, { headers, body }));
      const problem = expectProblem(res, 400, 'invalid_request_error');
      expect({ method, path, errors: problem.errors }).toEqual({
        method,
        path,
        errors: [{ detail: expect.any(String), parameter: 'fields' }],
      });
      expectProblem(
        await api.raw(
          httpRequest(method, `${path}?fields=email`, { headers: { ...headers, Authorization: 'Bearer nope' }, body }),
        ),
        401,
        'authentication_error',
      );
    }
    // HEAD is answered by the GET route, query included.
    expect((await api.raw(httpRequest('HEAD', '/v1/brands?pageSize=10', { headers: auth() }))).status).toBe(200);
    const head = await api.raw(httpRequest('HEAD', '/v1/contact-schema?fields=email', { headers: auth() }));
    expect([head.status, head.headers.get('content-type')]).toEqual([400, 'application/problem+json']);
    // Nothing was written by the refused requests.
    const [contacts] = await api.db.sql`select count(*)::int as n from contacts`;
    const [imports] = await api.db.sql`select count(*)::int as n from contact_imports`;
    expect([contacts!.n, imports!.n]).toEqual([0, 0]);
  });
});

describe('JSON bodies are UTF-8', () => {
  test('invalid UTF-8 in a JSON body is a 400 invalid_request_error, not U+FFFD', async () => {
    const bytes = Buffer.concat([
      Buffer.from('{"email":"u@example.com","attributes":{"firstName":"Ann'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}}'),
    ]);
    const res = await api.raw(
      httpRequest('POST', '/v1/contacts', { headers: { ...auth(), 'Content-Type': 'application/json' }, body: bytes }),
    );
    const body = expectProblem(res, 400, 'invalid_request_error');
    expect(body.detail).toContain('UTF-8');
    const [row] = await api.db.sql`select count(*)::int as n from contacts`;
    expect(row!.n).toBe(0);
  });

  test('valid UTF-8, a leading BOM included, is read', async () => {
    const body = '\ufeff{"email":"v@example.com","attributes":{"firstName":"Zoë 🐘"}}';
    const res = await api.raw(
      httpRequest('POST', '/v1/contacts', { headers: { ...auth(), 'Content-Type': 'application/json' }, body }),
    );
    expect(res.status).toBe(201);
    expect(JSON.parse(res.body).attributes.firstName).toBe('Zoë 🐘');
  });
});

describe('Upload links', () => {
  async function uploadUrl(): Promise<string> {
    await api.db.sql`delete from contact_imports`;
    const res = await api.raw(
      httpRequest('POST', '/v1/contact-imports', {
        headers: { ...auth(), 'Content-Type': 'application/json' },
        body: '{"columns":["Email"],"duplicateContactStrategy":"overwrite"}',
      }),
    );
    expect(res.status).toBe(201);
    return new URL(JSON.parse(res.body).uploadUrl).pathname;
  }

  test('another spelling of the same token is refused like a forged one; the canonical one is taken', async () => {
    const path = await uploadUrl();
    const token = path.slice('/uploads/'.length);
    const last = token.at(-1)!;
    // The MAC is 32 bytes in 43 characters: the last one carries 2 spare bits, so 4 characters decode alike.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const group = Math.floor(alphabet.indexOf(last) / 4) * 4;
    const twin = alphabet[group + ((alphabet.indexOf(last) + 1) % 4)]!;
    const [payload] = token.split('.');
    for (const spelling of [
      `${token.slice(0, -1)}${twin}`,
      `${token}=`,
      `${payload}=.${token.split('.')[1]}`,
      `${token.slice(0, -1)}%${last.charCodeAt(0).toString(16)}`,
    ]) {
      const res = await api.raw(httpRequest('PUT', `/uploads/${spelling}`, { body: 'Email\na@example.com\n' }));
      expect({ spelling, status: res.status }).toEqual({ spelling, status: 403 });
      expect(res.body).toContain('<Code>AccessDenied</Code>');
    }
    const ok = await api.raw(httpRequest('PUT', path, { body: 'Email\na@example.com\n' }));
    expect(ok.status).toBe(200);
  });
});

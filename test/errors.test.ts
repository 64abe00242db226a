// The one error envelope (spec: Errors; DESIGN: problem type, pointers, "never 422", api_error).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { t as T } from 'elysia';
import { Registry } from 'prom-client';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { buildApp } from '../src/app';
import { fromFramework } from '../src/http/framework-errors';
import { serveApi } from '../src/http/server';
import { HttpMetrics } from '../src/metrics/http';
import { DOCS_URL, expectProblem, testApp, type Call, type TestApp } from './helpers/app';
import { createBrand } from './helpers/fixtures';

const LIMIT = 2048;
const LIST = '00000000-0000-4000-8000-000000000000';
// A body route under /v1 built on the real app (same parse hook, validation mapping and error
// mapper), so body handling is tested here whatever the feature routes look like on a given day.
const PROBE = `/v1/suppression-lists/${LIST}/probe-body`;

let t: TestApp;
let probeApp: { handle(r: Request): Promise<Response> };

beforeAll(async () => {
  t = await testApp({}, { BODY_LIMIT_BYTES: String(LIMIT) });
  probeApp = buildApp(t.deps).post(PROBE, ({ body }) => ({ received: body.records.length }), {
    body: T.Object({ records: T.Array(T.String({ minLength: 2 }), { maxItems: 5 }), note: T.Optional(T.String()) }),
  });
});
afterAll(() => t.close());

/** Sends a request to the probe app with the account's key. */
async function probe(
  init: { body?: RequestInit['body']; headers?: Record<string, string>; key?: string | null; method?: string } = {},
): Promise<Call> {
  const headers = new Headers(init.headers);
  const key = init.key === undefined ? t.key : init.key;
  if (key !== null) headers.set('authorization', `Bearer ${key}`);
  const request = new Request(`http://localhost${PROBE}`, {
    method: init.method ?? 'POST',
    headers,
    body: init.body ?? null,
    ...(init.body instanceof ReadableStream && { duplex: 'half' }),
  } as RequestInit);
  const res = await probeApp.handle(request);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: the body stays the text
  }
  return { status: res.status, headers: res.headers, body };
}

const json = { 'content-type': 'application/json' };

/** A body of exactly `size` bytes that is valid for the probe route. */
function bodyOfSize(size: number): string {
  const base = JSON.stringify({ records: ['ok'], note: '' });
  return JSON.stringify({ records: ['ok'], note: 'x'.repeat(size - base.length) });
}

function streamOf(text: string, chunk = 256): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(at, at + chunk));
      at += chunk;
    },
  });
}

describe('The problem envelope', () => {
  test('a query fault: problem+json, type, status, title, detail, code, instance, errors[].parameter', async () => {
    const res = await t.call('GET', '/v1/brands?pageSize=9');
    const body = expectProblem(res, 400, 'invalid_request_error');
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(body.type).toBe(`${DOCS_URL}/error-codes#invalid_request_error`);
    expect(body.title.length).toBeGreaterThan(0);
    expect(body.detail).toContain('pageSize');
    expect(body.instance).toBe('/v1/brands');
    expect(body.errors).toEqual([{ detail: expect.any(String), parameter: 'pageSize' }]);
    expect(Object.keys(body).sort()).toEqual(['code', 'detail', 'errors', 'instance', 'status', 'title', 'type']);
  });

  test('a handler-raised query fault names its parameter too', async () => {
    const body = expectProblem(await t.call('GET', '/v1/brands?colour=red'), 400, 'invalid_request_error');
    expect(body.errors).toEqual([{ detail: expect.any(String), parameter: 'colour' }]);
  });

  test('a path fault names the path parameter', async () => {
    const body = expectProblem(await t.call('GET', '/v1/brands/not-a-uuid'), 400, 'invalid_request_error');
    expect(body.instance).toBe('/v1/brands/not-a-uuid');
    expect(body.errors).toEqual([{ detail: expect.any(String), parameter: 'brandId' }]);
  });

  test('a body fault carries a JSON pointer per failing value and no parameter', async () => {
    const res = await probe({ body: JSON.stringify({ records: ['ok', 'x', 'fine'] }), headers: json });
    const body = expectProblem(res, 400, 'invalid_request_error');
    expect(body.instance).toBe(PROBE);
    expect(body.errors).toEqual([{ detail: expect.any(String), pointer: '/records/1' }]);
  });

  test('a missing required body field points at the field', async () => {
    const body = expectProblem(
      await probe({ body: JSON.stringify({ note: 'n' }), headers: json }),
      400,
      'invalid_request_error',
    );
    expect(body.errors.map((e: { pointer: string }) => e.pointer)).toContain('/records');
    for (const e of body.errors) expect(e.parameter).toBeUndefined();
  });

  test('a body that is not an object is 400 with pointers', async () => {
    for (const raw of ['[1,2]', '"records"', '7', 'true']) {
      const body = expectProblem(await probe({ body: raw, headers: json }), 400, 'invalid_request_error');
      expect(body.errors.length).toBeGreaterThan(0);
      for (const e of body.errors) expect(typeof e.pointer).toBe('string');
    }
  });

  test('the probe route accepts a valid body (the baseline the refusals differ from)', async () => {
    const res = await probe({ body: JSON.stringify({ records: ['ok', 'fine'] }), headers: json });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: 2 });
  });

  test('401 and 403 use the envelope with instance', async () => {
    const unauth = expectProblem(await t.call('GET', '/v1/brands?x=1', { key: null }), 401, 'authentication_error');
    expect(unauth.instance).toBe('/v1/brands');
    expect(unauth.errors).toBeUndefined();
  });

  test('an unknown route is a 404 not_found_error envelope', async () => {
    const res = await t.call('GET', '/v1/nowhere/at/all');
    const body = expectProblem(res, 404, 'not_found_error');
    expect(body.instance).toBe('/v1/nowhere/at/all');
    expectProblem(await t.call('GET', '/nowhere', { key: null }), 404, 'not_found_error');
    expectProblem(await t.call('DELETE', '/v1/brands'), 404, 'not_found_error');
  });

  test('a response that fails its own schema is a 500 api_error that hides the internals', async () => {
    const id = await createBrand(t.db.sql, t.accountId, 'Corrupt');
    await t.db.sql`update brands set esps = '[{"id": "not-a-uuid", "name": "x"}]' where id = ${id}`;
    try {
      const res = await t.call('GET', `/v1/brands/${id}`);
      const body = expectProblem(res, 500, 'api_error');
      expect(body.detail).not.toMatch(/esps|uuid|schema/i);
      expect(body.errors).toBeUndefined();
      expect(body.instance).toBe(`/v1/brands/${id}`);
    } finally {
      await t.db.sql`update brands set deleted_at = now() where id = ${id}`;
    }
  });

  test('every 500 carries instance: a route that throws, and the server around the app', async () => {
    const thrower = buildApp(t.deps).get(`/v1/suppression-lists/${LIST}/throws`, () => {
      throw new Error('a bug, not for the client');
    });
    const res = await thrower.handle(
      new Request(`http://localhost/v1/suppression-lists/${LIST}/throws?x=1`, {
        headers: { authorization: `Bearer ${t.key}` },
      }),
    );
    const body = (await res.json()) as Record<string, unknown>;
    expect(res.status).toBe(500);
    expect(body).toMatchObject({ code: 'api_error', instance: `/v1/suppression-lists/${LIST}/throws` });
    // The server's own catch: what the app does not answer itself (here GET /metrics, whose registry throws).
    const registry = new Registry();
    registry.metrics = () => Promise.reject(new Error('a bug, not for the client'));
    const server = serveApi(
      t.deps,
      { port: 0, hostname: '127.0.0.1' },
      { registry, http: new HttpMetrics(new Registry()) },
    );
    try {
      const answer = await fetch(`http://127.0.0.1:${server.port}/metrics?x=1`);
      expect(answer.status).toBe(500);
      expect(answer.headers.get('content-type')).toStartWith('application/problem+json');
      expect(await answer.json()).toMatchObject({ code: 'api_error', instance: '/metrics' });
    } finally {
      await server.stop(true);
    }
  });
});

describe('the mapping of validation errors', () => {
  const deep = (n: number): unknown => {
    let value: unknown = 'x';
    for (let i = 0; i < n; i++) value = [value];
    return value;
  };

  test('lists errors from the validator, never formatting the value found: a deep one cannot overflow', () => {
    const validator = TypeCompiler.Compile(T.Object({ email: T.String() }));
    const failure = {
      type: 'body',
      value: { email: deep(200_000) },
      validator,
      get all(): never {
        throw new RangeError('Maximum call stack size exceeded.');
      },
    };
    const mapped = fromFramework('VALIDATION', failure);
    expect(mapped).toMatchObject({ status: 400, code: 'invalid_request_error' });
    expect(mapped?.errors).toEqual([{ detail: expect.any(String), pointer: '/email' }]);
  });

  test('a validation whose errors cannot be listed is still a 400', () => {
    const failure = {
      type: 'body',
      validator: {
        Errors(): never {
          throw new RangeError('Maximum call stack size exceeded.');
        },
      },
    };
    expect(fromFramework('VALIDATION', failure)).toMatchObject({
      status: 400,
      code: 'invalid_request_error',
      detail: 'The request body is not valid.',
    });
  });
});

describe('Malformed bodies', () => {
  test('malformed JSON is 400 invalid_request_error', async () => {
    for (const raw of ['{"records": [', '{records: []}', "{'records': []}", 'nul', '{"records": ["ok"]} trailing']) {
      const body = expectProblem(await probe({ body: raw, headers: json }), 400, 'invalid_request_error');
      expect(body.detail).toMatch(/JSON/);
    }
  });

  test('a body that is not JSON by content type is 400 and says so', async () => {
    const valid = JSON.stringify({ records: ['ok'] });
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/xml',
    ]) {
      const body = expectProblem(
        await probe({ body: valid, headers: { 'content-type': type } }),
        400,
        'invalid_request_error',
      );
      expect(body.detail).toMatch(/Content-Type: application\/json/);
    }
  });

  test('a body without a content type is 400', async () => {
    const res = await probe({ body: new Blob([JSON.stringify({ records: ['ok'] })]) });
    expectProblem(res, 400, 'invalid_request_error');
  });

  test('application/json with a charset, and +json types, are JSON', async () => {
    const valid = JSON.stringify({ records: ['ok'] });
    for (const type of ['application/json; charset=utf-8', 'application/merge-patch+json', 'Application/JSON']) {
      expect((await probe({ body: valid, headers: { 'content-type': type } })).status).toBe(200);
    }
  });

  test('a body at the limit (BODY_LIMIT_BYTES) is read', async () => {
    const raw = bodyOfSize(LIMIT);
    expect(new TextEncoder().encode(raw).length).toBe(LIMIT);
    expect((await probe({ body: raw, headers: { ...json, 'content-length': String(LIMIT) } })).status).toBe(200);
  });

  test('a body over the limit with Content-Length is 400 and names the limit', async () => {
    const raw = bodyOfSize(LIMIT + 1);
    const body = expectProblem(
      await probe({ body: raw, headers: { ...json, 'content-length': String(LIMIT + 1) } }),
      400,
      'invalid_request_error',
    );
    expect(body.detail).toContain(String(LIMIT));
  });

  test('a body over the limit without Content-Length (chunked) is 400 too', async () => {
    const raw = bodyOfSize(LIMIT * 4);
    const res = await probe({ body: streamOf(raw), headers: json });
    const body = expectProblem(res, 400, 'invalid_request_error');
    expect(body.detail).toContain(String(LIMIT));
  });

  test('a chunked body under the limit is read', async () => {
    const res = await probe({ body: streamOf(JSON.stringify({ records: ['ok', 'fine'] }), 3), headers: json });
    expect(res.status).toBe(200);
  });

  test('a body whose Content-Length understates its size is still bounded', async () => {
    const raw = bodyOfSize(LIMIT * 4);
    const res = await probe({ body: streamOf(raw), headers: { ...json, 'content-length': '10' } });
    expect(res.status).toBe(400);
  });

  test('an empty body on a body route is 400, not a crash', async () => {
    expectProblem(await probe({ headers: json }), 400, 'invalid_request_error');
    expectProblem(await probe({ body: '', headers: json }), 400, 'invalid_request_error');
  });
});

describe('No malformed request gets a 422 or a 5xx', () => {
  const paths = [
    '/v1/brands?page=abc',
    '/v1/brands?page=-1',
    '/v1/brands?page=1e20',
    '/v1/brands?page=99999999999999999999999',
    '/v1/brands?pageSize=1e400',
    '/v1/brands?pageSize=NaN',
    '/v1/brands?page=',
    '/v1/brands?enabled=',
    '/v1/brands?sort=name;drop',
    '/v1/brands?name=%00',
    '/v1/brands?name[contains]=%00',
    '/v1/brands?name=%E0%A4%A',
    '/v1/brands?name=%FF%FE',
    "/v1/brands?name=')%20or%201=1--",
    '/v1/brands?name[]=x',
    '/v1/brands?name[equal=x',
    '/v1/brands?name[[equal]]=x',
    '/v1/brands?%=1',
    '/v1/brands?=x',
    '/v1/brands?&&&',
    `/v1/brands?name=${'x'.repeat(20000)}`,
    '/v1/brands/urn:uuid:00000000-0000-4000-8000-000000000000',
    '/v1/brands/{00000000-0000-4000-8000-000000000000}',
    '/v1/brands/00000000000040008000000000000000',
    '/v1/brands/%00',
    '/v1/brands/..%2F..%2Fetc%2Fpasswd',
    `/v1/brands/${'a'.repeat(5000)}`,
    '/v1/brands//',
    '/v1/suppression-lists?sort=name,createdAt',
    '/v1/suppression-lists?pageSize=0',
    '/v1/suppression-lists/urn:uuid:00000000-0000-4000-8000-000000000000',
    '/v1/suppression-lists/%E2%80%AE',
    '/v1/contact-schema?x=%00',
  ];
  for (const path of paths) {
    test(`GET ${path.length > 80 ? path.slice(0, 80) + '…' : path}`, async () => {
      const res = await t.call('GET', path);
      expect(res.status).toBeLessThan(500);
      expect(res.status).not.toBe(422);
      if (res.status >= 400) expect(res.headers.get('content-type')).toStartWith('application/problem+json');
    });
  }

  const bodies: { name: string; body: NonNullable<RequestInit['body']>; headers?: Record<string, string> }[] = [
    { name: 'a JSON string', body: '"records"', headers: json },
    { name: 'JSON null', body: 'null', headers: json },
    { name: 'a number', body: '42', headers: json },
    { name: 'records of the wrong type', body: '{"records": "ok"}', headers: json },
    { name: 'records with nested objects', body: '{"records": [{"a": 1}]}', headers: json },
    { name: 'deeply nested JSON', body: '['.repeat(500) + ']'.repeat(500), headers: json },
    { name: 'invalid UTF-8', body: new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), headers: json },
    { name: 'a NUL byte', body: '{"records": ["a\u0000b"]}', headers: json },
    { name: 'a BOM', body: '\ufeff{"records": ["ok"]}', headers: json },
    { name: 'a proto key', body: '{"__proto__": {"x": 1}, "records": ["ok"]}', headers: json },
    {
      name: 'binary',
      body: new Uint8Array([0, 1, 2, 3, 255]),
      headers: { 'content-type': 'application/octet-stream' },
    },
  ];
  for (const b of bodies) {
    test(`POST with ${b.name}`, async () => {
      const res = await probe({ body: b.body, headers: b.headers });
      expect(res.status).toBeLessThan(500);
      expect(res.status).not.toBe(422);
      if (res.status >= 400) expect(res.headers.get('content-type')).toStartWith('application/problem+json');
    });
  }

  test('a body on a GET route is ignored or refused, never a crash', async () => {
    const res = await t.call('GET', '/v1/brands', { raw: '{bad', headers: json });
    expect(res.status).toBeLessThan(500);
  });
});

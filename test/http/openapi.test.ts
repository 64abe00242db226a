import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import createClient from 'openapi-fetch';
import type { paths } from '../generated/contact-api';
import { serveTestApi, type ServedApi } from '../helpers/api-server';
import { createAttribute, createBrand } from '../helpers/fixtures';
import { GENERATED_TYPES, generateTypes } from '../helpers/openapi';

type Json = Record<string, any>;

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

/** The endpoints of the contract's summary table (the upload link is no route of the document). */
const CONTRACT = [
  'POST /v1/contacts',
  'GET /v1/contacts/{emailMd5}',
  'PATCH /v1/contacts/{emailMd5}',
  'POST /v1/contacts/{emailMd5}/disable',
  'GET /v1/contacts/{emailMd5}/brands',
  'POST /v1/contacts/{emailMd5}/brands',
  'DELETE /v1/contacts/{emailMd5}/brands/{brandId}',
  'GET /v1/contacts/{emailMd5}/subscriptions',
  'POST /v1/contacts/{emailMd5}/subscriptions',
  'DELETE /v1/contacts/{emailMd5}/subscriptions/{brandId}',
  'GET /v1/contact-schema',
  'GET /v1/brands',
  'GET /v1/brands/{brandId}',
  'GET /v1/suppression-lists',
  'GET /v1/suppression-lists/{suppressionListId}',
  'POST /v1/suppression-lists/{suppressionListId}/records',
  'GET /v1/suppression-lists/{suppressionListId}/imports',
  'GET /v1/suppression-lists/{suppressionListId}/imports/{importId}',
  'GET /v1/contact-imports',
  'POST /v1/contact-imports',
  'GET /v1/contact-imports/{importId}',
];

let api: ServedApi;
let origin: string;
let doc: Json;
let dir: string;

beforeAll(async () => {
  api = await serveTestApi();
  origin = `http://127.0.0.1:${api.port}`;
  const res = await fetch(`${origin}/docs/json`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as Json;
  dir = await mkdtemp(join(tmpdir(), 'openapi-'));
});

afterAll(async () => {
  await api?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function operations(): { path: string; method: string; op: Json }[] {
  return Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ path, method, op: op as Json })),
  );
}

describe('the OpenAPI document (GET /docs/json)', () => {
  test('passes @redocly/cli lint with its recommended rules: 0 errors', async () => {
    const file = join(dir, 'openapi.json');
    await writeFile(file, JSON.stringify(doc, null, 2));
    const bin = join(import.meta.dir, '../..', 'node_modules', '.bin', 'redocly');
    const proc = Bun.spawn([bin, 'lint', '--extends', 'recommended', '--format', 'json', file], {
      cwd: dir, // no redocly.yaml anywhere up from here: the recommended rules as they ship
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [out, err, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    const report = JSON.parse(out.slice(out.indexOf('{'))) as {
      totals: { errors: number; warnings: number };
      problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[];
    };
    const errors = report.problems.filter((p) => p.severity === 'error');
    expect(errors.map((p) => `${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`)).toEqual([]);
    expect(report.totals.errors).toBe(0);
    expect({ code, err: code === 0 ? '' : err }).toEqual({ code: 0, err: '' });
  }, 120_000);

  test('is OpenAPI 3.1 with the service as its server and no TypeBox-only keyword', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([{ url: 'http://api.test' }]);
    expect(JSON.stringify(doc)).not.toContain('"error":"');
  });

  test('no path ends with a slash, and the list routes are there without one', () => {
    const paths = Object.keys(doc.paths);
    expect(paths.filter((p) => p.endsWith('/'))).toEqual([]);
    expect(paths).toContain('/v1/brands');
    expect(paths).toContain('/v1/suppression-lists');
    expect(paths.some((p) => p.startsWith('/docs') || p === '/metrics')).toBe(false);
  });

  test('every operation has a summary; every response a description and a schema; errors are problem+json', () => {
    const found: string[] = [];
    for (const { path, method, op } of operations()) {
      const at = `${method.toUpperCase()} ${path}`;
      if (typeof op.summary !== 'string' || !op.summary) found.push(`${at}: no summary`);
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        if (typeof response.description !== 'string' || !response.description) {
          found.push(`${at} ${status}: no description`);
        }
        if (status === '204') {
          if (response.content) found.push(`${at} 204: content`);
          continue;
        }
        const media = Object.keys(response.content ?? {});
        // The one body that is not JSON: the rejected-rows report, a CSV file (an extension).
        const success = path.endsWith('/rejected-rows') ? 'text/csv' : 'application/json';
        const want = Number(status) >= 400 ? 'application/problem+json' : success;
        if (media.join() !== want) found.push(`${at} ${status}: ${media.join() || 'no content'}, not ${want}`);
        if (!response.content?.[want]?.schema) found.push(`${at} ${status}: no schema`);
      }
      for (const media of Object.keys(op.requestBody?.content ?? {})) {
        if (media !== 'application/json') found.push(`${at}: request body ${media}`);
      }
    }
    expect(found).toEqual([]);
    expect(operations().length).toBeGreaterThan(15);
  });

  test("every /v1 operation is one of the contract's, or its description says it is an extension", () => {
    const ops = operations().filter((o) => o.path.startsWith('/v1/'));
    const names = ops.map((o) => `${o.method.toUpperCase()} ${o.path}`);
    expect(CONTRACT.filter((c) => !names.includes(c))).toEqual([]);
    const extensions = ops.filter((o) => !CONTRACT.includes(`${o.method.toUpperCase()} ${o.path}`));
    expect(
      extensions
        .filter((o) => !String(o.op.description ?? '').startsWith('An extension beyond the contract.'))
        .map((o) => `${o.method.toUpperCase()} ${o.path}`),
    ).toEqual([]);
    expect(extensions.map((o) => `${o.method.toUpperCase()} ${o.path}`)).toEqual([
      'POST /v1/suppression-checks',
      'DELETE /v1/contacts/{emailMd5}',
      'POST /v1/contact-erasures',
      'GET /v1/contact-imports/{importId}/rejected-rows',
      'POST /v1/contact-imports/{importId}/cancel',
      'GET /v1/events',
      'GET /v1/webhook-endpoints',
      'POST /v1/webhook-endpoints',
      'GET /v1/webhook-endpoints/{id}',
      'DELETE /v1/webhook-endpoints/{id}',
      'GET /v1/contact-exports',
      'POST /v1/contact-exports',
      'GET /v1/contact-exports/{id}',
      'POST /v1/contact-searches',
      'POST /v1/contact-counts',
      'GET /v1/contact-stats',
    ]);
  });

  test('test/generated/contact-api.ts is what openapi-typescript makes of it', async () => {
    const fresh = await generateTypes(doc);
    if (process.env.UPDATE_OPENAPI_TYPES === '1') await writeFile(GENERATED_TYPES, fresh);
    const committed = await readFile(GENERATED_TYPES, 'utf8').catch(() => '');
    expect(
      committed === fresh ? 'up to date' : 'stale: UPDATE_OPENAPI_TYPES=1 bun test/run.ts test/http/openapi.test.ts',
    ).toBe('up to date');
  });
});

describe("the README's examples through a client generated from the document (openapi-fetch)", () => {
  test('list brands, create, get and patch a contact, add a brand, create an import', async () => {
    const brandA = await createBrand(api.db.sql, api.accountId, 'Alpha');
    const brandB = await createBrand(api.db.sql, api.accountId, 'Beta');
    for (const [name, type] of [
      ['firstName', 'string'],
      ['age', 'number'],
      ['vip', 'boolean'],
      ['interests', 'array'],
    ] as const) {
      await createAttribute(api.db.sql, api.accountId, name, type);
    }
    const client = createClient<paths>({ baseUrl: origin, headers: { Authorization: `Bearer ${api.key}` } });

    // curl -H "Authorization: Bearer <key>" $API/v1/brands
    const brands = await client.GET('/v1/brands');
    expect(brands.response.status).toBe(200);
    const names: string[] = (brands.data?.data ?? []).map((b) => b.name);
    expect(names.sort()).toEqual(['Alpha', 'Beta']);
    const listed = await client.GET('/v1/brands', { params: { query: { sort: '-name', pageSize: '10' } } });
    expect(listed.error).toBeUndefined();
    expect(listed.data?.data.map((b) => b.name)).toEqual(['Beta', 'Alpha']);

    // Create (201), or merge into an existing contact (200) with a strategy
    const created = await client.POST('/v1/contacts', {
      body: {
        email: 'ann@example.com',
        attributes: { firstName: 'Ann', age: 42, vip: true, interests: ['a', 'b'] },
        brandIds: [brandA],
        duplicateContactStrategy: 'keep',
      },
    });
    expect(created.response.status).toBe(201);
    const email: string | undefined = created.data?.email;
    expect(email).toBe('ann@example.com');

    // Get: the path key is the md5 of the lowercased address
    const md5 = createHash('md5').update('ann@example.com').digest('hex');
    const got = await client.GET('/v1/contacts/{emailMd5}', { params: { path: { emailMd5: md5 } } });
    expect(got.response.status).toBe(200);
    expect(got.data?.attributes).toMatchObject({ firstName: 'Ann', age: 42, vip: true, interests: ['a', 'b'] });

    // Patch (RFC 7386): a value sets, null removes, absent attributes are untouched
    const patched = await client.PATCH('/v1/contacts/{emailMd5}', {
      params: { path: { emailMd5: md5 } },
      body: { attributes: { firstName: 'Anna', age: null } },
    });
    expect(patched.response.status).toBe(200);
    expect(patched.data?.attributes).toEqual({ firstName: 'Anna', vip: true, interests: ['a', 'b'] });

    // Add brands: only new ones are added, one brand-subscribe event each
    const added = await client.POST('/v1/contacts/{emailMd5}/brands', {
      params: { path: { emailMd5: md5 } },
      body: { brandIds: [brandB], publishBrandSubscribeEvents: true },
    });
    expect(added.response.status).toBe(200);
    const brandsOfContact = await client.GET('/v1/contacts/{emailMd5}/brands', { params: { path: { emailMd5: md5 } } });
    expect(JSON.stringify(brandsOfContact.data)).toContain(brandB);

    // Bulk import, 1. Declare the file: its header row, in order, and how rows merge
    const declared = await client.POST('/v1/contact-imports', {
      body: { columns: ['Email', 'firstName', 'age'], duplicateContactStrategy: 'overwrite' },
    });
    expect(declared.response.status).toBe(201);
    const importId: string | undefined = declared.data?.id;
    expect(declared.data?.status).toBe('awaiting-upload');
    expect(typeof declared.data?.uploadUrl).toBe('string');
    // 3. Poll until status is success or failed (no worker here: it waits for its upload)
    const polled = await client.GET('/v1/contact-imports/{importId}', { params: { path: { importId: importId! } } });
    expect(polled.data?.status).toBe('awaiting-upload');
    // An extension: give up an import that has not started, so the account may create the next one at once
    const cancelled = await client.POST('/v1/contact-imports/{importId}/cancel', {
      params: { path: { importId: importId! } },
      body: {},
    });
    expect(cancelled.response.status).toBe(200);
    expect(cancelled.data).toMatchObject({
      id: importId,
      status: 'failed',
      failureReason: 'The import was cancelled.',
    });

    // Errors come back typed as problem details.
    const missing = await client.GET('/v1/contacts/{emailMd5}', { params: { path: { emailMd5: 'f'.repeat(32) } } });
    expect(missing.response.status).toBe(404);
    expect(missing.response.headers.get('content-type')).toStartWith('application/problem+json');
    const code: string | undefined = missing.error?.code;
    expect(code).toBe('not_found_error');

    // The types are the document's: a path it does not have is a compile error.
    // @ts-expect-error -- /v1/contact is no path of the API
    await client.GET('/v1/contact', {}).catch(() => undefined);
  });
});

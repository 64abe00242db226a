/**
 * The corpus of malformed requests of test/imports/malformed-corpus.test.ts: data tables and the generator
 * that turns them into raw HTTP/1.1 requests with the answer each must get. Every endpoint of the
 * spec appears under every heading that applies to it.
 */
import { requiredScope, type Scope } from '../../src/auth/scopes';
import { httpRequest } from './api-server';

/** What the world looks like to the corpus: keys of each kind and ids that exist. */
export interface CorpusContext {
  key: string;
  /** Each key lacks exactly the scope named (every other scope granted). */
  keyWithout: Record<Scope, string>;
  noScopeKey: string;
  revokedKey: string;
  suspendedKey: string;
  /** An existing key id with a wrong secret. */
  wrongSecretKey: string;
  brandId: string;
  listId: string;
  md5: string;
  uploadToken: string;
}

export type Expected =
  /**
   * A problem+json answer from the app. `pointer`/`parameter`: some entry of `errors` names it (a pointer may
   * be deeper).
   */
  | { kind: 'problem'; status: number; code: string; pointer?: string; parameter?: string }
  /** A success: the malformed part is one the spec lets the app read (listed to show it stays so). */
  | { kind: 'ok'; status: number }
  /** The upload link speaks S3's XML errors, not problem+json (DESIGN.md: object store, local driver). */
  | { kind: 's3'; status: number; code: string }
  /**
   * Refused by Bun's HTTP parser before the app is called: an empty answer with this status, or 0 for a closed
   * connection.
   */
  | { kind: 'runtime'; status: number };

export interface CorpusCase {
  group: string;
  name: string;
  request: Uint8Array;
  expected: Expected;
}

const UUID = '00000000-0000-4000-8000-000000000000';
const problem = (status: number, code: string, where: { pointer?: string; parameter?: string } = {}): Expected => ({
  kind: 'problem',
  status,
  code,
  ...where,
});
const invalid = (where: { pointer?: string; parameter?: string } = {}) => problem(400, 'invalid_request_error', where);

interface Route {
  method: string;
  /** With `{md5}`, `{brand}`, `{list}`, `{uuid}` placeholders. */
  path: string;
  /** A body the route accepts as to its shape. */
  body?: Record<string, unknown>;
  /** Path parameters and the placeholder each fills. */
  params?: Array<[name: string, placeholder: string]>;
}

/** Every endpoint of the spec (the upload link apart). */
export const ROUTES: Route[] = [
  { method: 'POST', path: '/v1/contacts', body: { email: 'corpus@example.com' } },
  { method: 'GET', path: '/v1/contacts/{md5}', params: [['emailMd5', '{md5}']] },
  {
    method: 'PATCH',
    path: '/v1/contacts/{md5}',
    body: { attributes: { firstName: 'Ann' } },
    params: [['emailMd5', '{md5}']],
  },
  { method: 'POST', path: '/v1/contacts/{md5}/disable', params: [['emailMd5', '{md5}']] },
  { method: 'GET', path: '/v1/contacts/{md5}/brands', params: [['emailMd5', '{md5}']] },
  {
    method: 'POST',
    path: '/v1/contacts/{md5}/brands',
    body: { brandIds: ['{brand}'] },
    params: [['emailMd5', '{md5}']],
  },
  {
    method: 'DELETE',
    path: '/v1/contacts/{md5}/brands/{brand}',
    params: [
      ['emailMd5', '{md5}'],
      ['brandId', '{brand}'],
    ],
  },
  { method: 'GET', path: '/v1/contacts/{md5}/subscriptions', params: [['emailMd5', '{md5}']] },
  {
    method: 'POST',
    path: '/v1/contacts/{md5}/subscriptions',
    body: { brandIds: ['{brand}'] },
    params: [['emailMd5', '{md5}']],
  },
  {
    method: 'DELETE',
    path: '/v1/contacts/{md5}/subscriptions/{brand}',
    params: [
      ['emailMd5', '{md5}'],
      ['brandId', '{brand}'],
    ],
  },
  { method: 'GET', path: '/v1/contact-schema' },
  { method: 'GET', path: '/v1/brands' },
  { method: 'GET', path: '/v1/brands/{brand}', params: [['brandId', '{brand}']] },
  { method: 'GET', path: '/v1/suppression-lists' },
  { method: 'GET', path: '/v1/suppression-lists/{list}', params: [['suppressionListId', '{list}']] },
  {
    method: 'POST',
    path: '/v1/suppression-lists/{list}/records',
    body: { records: ['corpus@example.com'] },
    params: [['suppressionListId', '{list}']],
  },
  { method: 'GET', path: '/v1/suppression-lists/{list}/imports', params: [['suppressionListId', '{list}']] },
  {
    method: 'GET',
    path: '/v1/suppression-lists/{list}/imports/{uuid}',
    params: [
      ['suppressionListId', '{list}'],
      ['importId', '{uuid}'],
    ],
  },
  { method: 'GET', path: '/v1/contact-imports' },
  { method: 'POST', path: '/v1/contact-imports', body: { columns: ['Email'], duplicateContactStrategy: 'overwrite' } },
  { method: 'GET', path: '/v1/contact-imports/{uuid}', params: [['importId', '{uuid}']] },
];

const LIST_ROUTES = ROUTES.filter(
  (r) =>
    r.method === 'GET' &&
    ['/v1/brands', '/v1/suppression-lists', '/v1/suppression-lists/{list}/imports', '/v1/contact-imports'].includes(
      r.path,
    ),
);

function fill(text: string, ctx: CorpusContext, overrides: Record<string, string> = {}): string {
  const values: Record<string, string> = {
    '{md5}': ctx.md5,
    '{brand}': ctx.brandId,
    '{list}': ctx.listId,
    '{uuid}': UUID,
    ...overrides,
  };
  return text.replace(/\{md5\}|\{brand\}|\{list\}|\{uuid\}/g, (p) => values[p]!);
}

const label = (r: Route) => `${r.method} ${r.path}`;
const short = (s: string) => (s.length > 60 ? `${s.slice(0, 60)}…(${s.length})` : s);

function send(
  ctx: CorpusContext,
  method: string,
  target: string,
  opts: {
    key?: string | null;
    authorization?: string;
    headers?: Record<string, string>;
    body?: string | Uint8Array;
    json?: unknown;
  } = {},
) {
  const headers: Record<string, string> = {};
  const key = opts.key === undefined ? ctx.key : opts.key;
  if (opts.authorization !== undefined) headers.Authorization = opts.authorization;
  else if (key !== null) headers.Authorization = `Bearer ${key}`;
  let body = opts.body;
  if (opts.json !== undefined) {
    body = JSON.stringify(opts.json);
    headers['Content-Type'] = 'application/json';
  }
  return httpRequest(method, target, { headers: { ...headers, ...opts.headers }, body });
}

function routeBody(r: Route, ctx: CorpusContext): unknown {
  return r.body && JSON.parse(fill(JSON.stringify(r.body), ctx));
}

/** Missing, malformed, revoked, suspended and under-scoped keys on every endpoint. */
function keyCases(ctx: CorpusContext): CorpusCase[] {
  const out: CorpusCase[] = [];
  for (const r of ROUTES) {
    const target = fill(r.path, ctx);
    const json = routeBody(r, ctx);
    const scope = requiredScope(r.method, target.split('?')[0]!)!;
    const refusals: Array<[string, { key?: string | null; authorization?: string }, Expected]> = [
      ['no Authorization header', { key: null }, problem(401, 'authentication_error')],
      ['"Bearer" without a key', { authorization: 'Bearer' }, problem(401, 'authentication_error')],
      ['Basic credentials', { authorization: 'Basic dXNlcjpwYXNz' }, problem(401, 'authentication_error')],
      ['a key that is not ck_<id>_<secret>', { authorization: 'Bearer ck_nope' }, problem(401, 'authentication_error')],
      ['a key with a wrong secret', { key: ctx.wrongSecretKey }, problem(401, 'authentication_error')],
      ['a revoked key', { key: ctx.revokedKey }, problem(401, 'authentication_error')],
      [
        'two keys in one header',
        { authorization: `Bearer ${ctx.key} ${ctx.key}` },
        problem(401, 'authentication_error'),
      ],
      ['a key of a suspended account', { key: ctx.suspendedKey }, problem(403, 'permission_error')],
      ['a key without any scope', { key: ctx.noScopeKey }, problem(403, 'permission_error')],
      [`a key without ${scope}`, { key: ctx.keyWithout[scope] }, problem(403, 'permission_error')],
    ];
    for (const [name, auth, expected] of refusals) {
      out.push({
        group: 'keys',
        name: `${label(r)}: ${name}`,
        request: send(ctx, r.method, target, { ...auth, json }),
        expected,
      });
    }
  }
  return out;
}

const BAD_UUIDS = [
  'not-a-uuid',
  `urn:uuid:${UUID}`,
  `{${UUID}}`,
  UUID.replaceAll('-', ''),
  `${UUID}0`,
  `${UUID.slice(0, -1)}g`,
  '%00',
  '%20',
  'a%2Fb',
  '%ZZ',
  '%E2%80%AE',
  "'%20or%201=1--",
  'x'.repeat(3000),
];
const BAD_MD5S = [
  '0'.repeat(31),
  '0'.repeat(33),
  'g'.repeat(32),
  `%20${'0'.repeat(31)}`,
  `${'0'.repeat(31)}%00`,
  'a%2Fb',
  '%ZZ',
  `${'0'.repeat(32)}%2F`,
  'x'.repeat(3000),
];

/** Malformed ids in every path parameter of every endpoint. */
function pathCases(ctx: CorpusContext): CorpusCase[] {
  const out: CorpusCase[] = [];
  for (const r of ROUTES) {
    for (const [param, placeholder] of r.params ?? []) {
      for (const bad of placeholder === '{md5}' ? BAD_MD5S : BAD_UUIDS) {
        const target = fill(r.path, ctx, { [placeholder]: bad });
        out.push({
          group: 'path ids',
          name: `${label(r)}: ${param}=${short(bad)}`,
          request: send(ctx, r.method, target, { json: routeBody(r, ctx) }),
          expected: invalid({ parameter: param }),
        });
      }
    }
  }
  return out;
}

const enc = (s: string) => new TextEncoder().encode(s);
const INVALID_UTF8 = new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]); // {"a":"\xc3("}

/** What is wrong with a body, whatever the route: syntax, type, encoding, size. */
function bodyCases(ctx: CorpusContext, limit: number): CorpusCase[] {
  const out: CorpusCase[] = [];
  for (const r of ROUTES.filter((x) => x.method !== 'GET' && x.method !== 'DELETE')) {
    const target = fill(r.path, ctx);
    const good = JSON.stringify(routeBody(r, ctx) ?? {});
    const json = { 'Content-Type': 'application/json' };
    const raw: Array<[string, string | Uint8Array, Record<string, string>, Expected]> = [
      ['truncated JSON', good.slice(0, -1), json, invalid()],
      ['single-quoted JSON', good === '{}' ? "{'a':1}" : good.replaceAll('"', "'"), json, invalid()],
      ['unquoted keys', '{a:1}', json, invalid()],
      ['trailing garbage', `${good} x`, json, invalid()],
      ['two documents', `${good}${good}`, json, invalid()],
      ['a trailing comma', good.replace(/}$/, ',}'), json, invalid()],
      ['NaN', '{"a":NaN}', json, invalid()],
      ['a comment', `/* c */${good}`, json, invalid()],
      ['invalid UTF-8', INVALID_UTF8, json, invalid()],
      ['UTF-16 encoded', new Uint8Array(Buffer.from(good, 'utf16le')), json, invalid()],
      ['an array', '[]', json, invalid({ pointer: '' })],
      ['a string', '"x"', json, invalid({ pointer: '' })],
      ['a number', '42', json, invalid({ pointer: '' })],
      ['null', 'null', json, invalid({ pointer: '' })],
      ['true', 'true', json, invalid({ pointer: '' })],
      ['text/plain', good, { 'Content-Type': 'text/plain' }, invalid()],
      ['a form', 'a=1', { 'Content-Type': 'application/x-www-form-urlencoded' }, invalid()],
      ['multipart', '--x\r\n\r\n--x--', { 'Content-Type': 'multipart/form-data; boundary=x' }, invalid()],
      ['XML', '<a/>', { 'Content-Type': 'application/xml' }, invalid()],
      ['no content type', good, {}, invalid()],
      ['application/jsonx', good, { 'Content-Type': 'application/jsonx' }, invalid()],
      ['an empty content type', good, { 'Content-Type': '' }, invalid()],
      ['an oversized body', `{"a":"${'x'.repeat(limit)}"}`, json, invalid()],
      [
        'an oversized chunked body',
        chunked(`{"a":"${'x'.repeat(limit)}"}`),
        { ...json, 'Transfer-Encoding': 'chunked' },
        invalid(),
      ],
      ['deeply nested', '['.repeat(5000) + ']'.repeat(5000), json, invalid()],
      [
        'an unknown field',
        good.replace(/^\{/, good === '{}' ? '{"bogus":1' : '{"bogus":1,'),
        json,
        invalid({ pointer: '/bogus' }),
      ],
      [
        'an unknown field in another case',
        good.replace(/^\{/, good === '{}' ? '{"Bogus":1' : '{"Bogus":1,'),
        json,
        invalid({ pointer: '/Bogus' }),
      ],
      [
        'a __proto__ field',
        good.replace(/^\{/, good === '{}' ? '{"__proto__":{"x":1}' : '{"__proto__":{"x":1},'),
        json,
        invalid({ pointer: '/__proto__' }),
      ],
      [
        'a constructor field',
        good.replace(/^\{/, good === '{}' ? '{"constructor":1' : '{"constructor":1,'),
        json,
        invalid({ pointer: '/constructor' }),
      ],
    ];
    if (r.body) raw.push(['an empty body', '', json, invalid()], ['whitespace only', '  \n', json, invalid()]);
    for (const [name, body, headers, expected] of raw) {
      out.push({
        group: 'bodies',
        name: `${label(r)}: ${name}`,
        request: send(ctx, r.method, target, { headers, body }),
        expected,
      });
    }
  }
  return out;
}

function chunked(text: string): Uint8Array {
  const bytes = enc(text);
  const parts: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += 1000) {
    const piece = bytes.subarray(at, at + 1000);
    parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), Buffer.from(piece), Buffer.from('\r\n'));
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

/** Wrong types and values for every body field of every body route: [route, field's pointer, body]. */
function fieldCases(ctx: CorpusContext): CorpusCase[] {
  const contacts = ROUTES.find((r) => label(r) === 'POST /v1/contacts')!;
  const patch = ROUTES.find((r) => label(r) === 'PATCH /v1/contacts/{md5}')!;
  const brands = ROUTES.filter((r) => r.method === 'POST' && /\/(brands|subscriptions)$/.test(r.path));
  const records = ROUTES.find((r) => r.path.endsWith('/records'))!;
  const imports = ROUTES.find((r) => label(r) === 'POST /v1/contact-imports')!;
  const email = 'corpus@example.com';
  const wrong: Array<[Route, string, unknown]> = [];
  const each = (route: Route, pointer: string, base: Record<string, unknown>, field: string, values: unknown[]) => {
    for (const v of values) wrong.push([route, pointer, { ...base, [field]: v }]);
  };
  // POST /v1/contacts
  each(contacts, '/email', {}, 'email', [
    1,
    null,
    true,
    [],
    {},
    '',
    'not-an-email',
    'a@b',
    'a b@example.com',
    `${'a'.repeat(250)}@example.com`,
    'a@example.com\u0000',
  ]);
  wrong.push([contacts, '/email', {}]);
  each(contacts, '/brandIds', { email }, 'brandIds', [
    'x',
    1,
    {},
    null,
    [1],
    ['not-a-uuid'],
    [`urn:uuid:${UUID}`],
    [null],
    [[UUID]],
    [UUID],
  ]);
  each(contacts, '/publishBrandSubscribeEvents', { email }, 'publishBrandSubscribeEvents', ['yes', 1, null, [], {}]);
  each(contacts, '/attributes', { email }, 'attributes', [[], 'x', 1, true, null, [['a', 1]]]);
  each(contacts, '/duplicateContactStrategy', { email }, 'duplicateContactStrategy', [
    'merge',
    'OVERWRITE',
    '',
    1,
    null,
    ['keep'],
  ]);
  each(contacts, '/overwriteBrands', { email, duplicateContactStrategy: 'overwrite' }, 'overwriteBrands', [
    'yes',
    2,
    null,
    {},
  ]);
  each(contacts, '/restoreDisabled', { email, duplicateContactStrategy: 'overwrite' }, 'restoreDisabled', [
    'yes',
    2,
    null,
    [],
  ]);
  wrong.push([contacts, '/restoreDisabled', { email, restoreDisabled: true }]);
  // PATCH /v1/contacts/{md5}
  each(patch, '/attributes', {}, 'attributes', [[], 'x', 1, true, null]);
  wrong.push([patch, '/attributes', {}]);
  // POST .../brands and .../subscriptions
  for (const r of brands) {
    each(r, '/brandIds', {}, 'brandIds', [
      'x',
      1,
      {},
      null,
      [],
      [1],
      ['not-a-uuid'],
      [UUID, UUID],
      Array.from({ length: 101 }, (_, i) => UUID.slice(0, -3) + String(i).padStart(3, '0')),
    ]);
    wrong.push([r, '/brandIds', {}]);
    each(r, '/publishBrandSubscribeEvents', { brandIds: [ctx.brandId] }, 'publishBrandSubscribeEvents', [
      'yes',
      1,
      null,
    ]);
  }
  // POST .../records
  each(records, '/records', {}, 'records', [
    'x',
    1,
    {},
    null,
    [],
    [1],
    [null],
    [{}],
    [['a@example.com']],
    Array.from({ length: 1001 }, (_, i) => `r${i}@example.com`),
  ]);
  wrong.push([records, '/records', {}]);
  wrong.push([records, '/records/1', { records: ['a@example.com', 'a@example.com'] }]);
  wrong.push([records, '/records/0', { records: ['not an email'] }]);
  // POST /v1/contact-imports
  const strategy = { duplicateContactStrategy: 'overwrite' };
  each(imports, '/columns', strategy, 'columns', ['Email', 1, {}, null, [], [1], [null], [['Email']]]);
  wrong.push([imports, '/columns', strategy]);
  wrong.push([imports, '/columns/1', { ...strategy, columns: ['Email', 'email'] }]);
  wrong.push([imports, '/columns/1', { ...strategy, columns: ['Email', 'noSuchAttribute'] }]);
  wrong.push([imports, '/columns', { ...strategy, columns: ['firstName'] }]);
  each(imports, '/duplicateContactStrategy', { columns: ['Email'] }, 'duplicateContactStrategy', [
    'merge',
    '',
    1,
    null,
  ]);
  wrong.push([imports, '/duplicateContactStrategy', { columns: ['Email'] }]);
  each(imports, '/brandIds', { columns: ['Email'], ...strategy }, 'brandIds', ['x', [1], ['not-a-uuid'], [UUID]]);
  each(imports, '/overwriteBrands', { columns: ['Email'], ...strategy }, 'overwriteBrands', ['yes', 1, null]);
  each(imports, '/restoreDisabled', { columns: ['Email'], ...strategy }, 'restoreDisabled', ['yes', 1, null]);
  each(imports, '/publishBrandSubscribeEvents', { columns: ['Email'], ...strategy }, 'publishBrandSubscribeEvents', [
    'yes',
    1,
    null,
  ]);
  return wrong.map(([r, pointer, body]) => ({
    group: 'body fields',
    name: `${label(r)}: ${short(JSON.stringify(body))}`,
    request: send(ctx, r.method, fill(r.path, ctx), { json: body }),
    expected: invalid({ pointer }),
  }));
}

/** Hostile attribute names and values on create and patch. */
function attributeCases(ctx: CorpusContext): CorpusCase[] {
  const names = [
    '__proto__',
    'constructor',
    'prototype',
    'toString',
    'hasOwnProperty',
    'valueOf',
    'a/b',
    '~x',
    '',
    ' ',
    'Email',
    'Brand',
    'brand',
    'email:md5',
    'contactEmail:md5',
    'contactEmail:domain',
    'x'.repeat(5000),
    'a\u0000b',
    '\ud800',
    '<script>alert(1)</script>',
    "'; drop table contacts; --",
    '%s%n%x',
    '../../etc/passwd',
    '$where',
    'firstName ',
  ];
  const values: Array<[string, unknown]> = [
    ['firstName', 'x'.repeat(256)],
    ['firstName', {}],
    ['firstName', { __proto__: null, a: 1 }],
    ['firstName', [{}]],
    ['firstName', [1]],
    ['age', 'abc'],
    ['age', '1e400'],
    ['age', {}],
    ['age', [1]],
    ['vip', 'maybe'],
    ['vip', {}],
    ['tags', [{}]],
    ['tags', [null]],
    ['tags', ['x'.repeat(256)]],
    ['tags', { a: 'b' }],
    ['contactEmail', 'not-an-email'],
    ['contactEmail', 42],
  ];
  const out: CorpusCase[] = [];
  const md5Target = `/v1/contacts/${ctx.md5}`;
  const pointerOf = (name: string) => `/attributes/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`;
  for (const name of names) {
    const attributes = JSON.parse(`{${JSON.stringify(name)}:"v"}`);
    const email = 'attr@example.com';
    out.push({
      group: 'attributes',
      name: `create: name ${short(JSON.stringify(name))}`,
      request: send(ctx, 'POST', '/v1/contacts', { json: { email, attributes } }),
      expected: invalid({ pointer: pointerOf(name) }),
    });
    out.push({
      group: 'attributes',
      name: `patch: name ${short(JSON.stringify(name))}`,
      request: send(ctx, 'PATCH', md5Target, { json: { attributes } }),
      expected: invalid({ pointer: pointerOf(name) }),
    });
  }
  for (const [name, value] of values) {
    const attributes = { [name]: value };
    out.push({
      group: 'attributes',
      name: `create: ${name}=${short(JSON.stringify(value))}`,
      request: send(ctx, 'POST', '/v1/contacts', { json: { email: 'attr@example.com', attributes } }),
      expected: invalid({ pointer: pointerOf(name) }),
    });
    out.push({
      group: 'attributes',
      name: `patch: ${name}=${short(JSON.stringify(value))}`,
      request: send(ctx, 'PATCH', md5Target, { json: { attributes } }),
      expected: invalid({ pointer: pointerOf(name) }),
    });
  }
  // Invalid UTF-8 inside an otherwise valid value: a lenient decoder would store U+FFFD.
  const badText = (json: string) =>
    Buffer.concat([
      Buffer.from(json.slice(0, json.indexOf('Ann') + 3)),
      Buffer.from([0xff]),
      Buffer.from(json.slice(json.indexOf('Ann') + 3)),
    ]);
  const utf8 = { 'Content-Type': 'application/json' };
  out.push({
    group: 'attributes',
    name: 'create: firstName with a 0xFF byte',
    request: send(ctx, 'POST', '/v1/contacts', {
      headers: utf8,
      body: badText('{"email":"attr@example.com","attributes":{"firstName":"Ann"}}'),
    }),
    expected: invalid(),
  });
  out.push({
    group: 'attributes',
    name: 'patch: firstName with a 0xFF byte',
    request: send(ctx, 'PATCH', md5Target, { headers: utf8, body: badText('{"attributes":{"firstName":"Ann"}}') }),
    expected: invalid(),
  });
  // A patch rejects empty strings outright (spec: PATCH rule 2).
  out.push({
    group: 'attributes',
    name: 'patch: firstName=""',
    request: send(ctx, 'PATCH', md5Target, { json: { attributes: { firstName: '' } } }),
    expected: invalid({ pointer: '/attributes/firstName' }),
  });
  return out;
}

const BAD_INTEGERS = [
  '0x10',
  '1e1',
  '%2B1',
  '%201',
  '1%20',
  '1.0',
  '1.5',
  '-1',
  '0',
  '',
  'abc',
  'NaN',
  'Infinity',
  '1e400',
  '9007199254740993',
  '99999999999999999999999',
  '%00',
  '1%00',
  '0b1',
  '%EF%BC%91',
];

/** Bad query values on every list endpoint, and unknown or repeated parameters anywhere under /v1. */
function queryCases(ctx: CorpusContext): CorpusCase[] {
  const out: CorpusCase[] = [];
  for (const r of LIST_ROUTES) {
    const path = fill(r.path, ctx);
    const q: Array<[string, string | undefined]> = [];
    for (const v of BAD_INTEGERS) q.push([`page=${v}`, 'page'], [`pageSize=${v}`, 'pageSize']);
    q.push(
      ['pageSize=9', 'pageSize'],
      ['pageSize=201', 'pageSize'],
      ['page=1&page=2', 'page'],
      ['pageSize=10&pageSize=10', 'pageSize'],
    );
    q.push(
      ['bogus=1', 'bogus'],
      ['Page=1', 'Page'],
      ['page[]=1', 'page[]'],
      ['%00=1', '\u0000'],
      ['bogus=1&bogus=2', 'bogus'],
    );
    if (r.path === '/v1/brands' || r.path === '/v1/suppression-lists')
      q.push(['sort=bogus', 'sort'], ['sort=', 'sort'], ['sort=name&sort=-name', 'sort'], ['sort=NAME', 'sort']);
    if (r.path === '/v1/suppression-lists') q.push(['sort=name,createdAt', 'sort']);
    if (r.path === '/v1/brands') {
      q.push(
        ['enabled=yes', 'enabled'],
        ['enabled=', 'enabled'],
        ['enabled=2', 'enabled'],
        ['enabled=true&enabled=false', 'enabled'],
      );
      q.push(['name[regex]=x', 'name[regex]'], ['name[equal]=a&name[equal]=b', 'name[equal]'], ['name[]=x', 'name[]']);
      // Two filters: the 400 names neither (src/brands decides which is at fault; reported, not ours to change).
      q.push(['name=a&name[contains]=b', undefined]);
    }
    for (const [query, parameter] of q) {
      out.push({
        group: 'query',
        name: `GET ${r.path}?${short(query)}`,
        request: send(ctx, 'GET', `${path}?${query}`),
        expected: invalid(parameter === undefined ? {} : { parameter }),
      });
    }
  }
  for (const r of ROUTES.filter((x) => !LIST_ROUTES.includes(x))) {
    for (const [query, parameter] of [
      ['fields=email', 'fields'],
      ['page=1', 'page'],
      ['x=1&x=2', 'x'],
    ] as const) {
      out.push({
        group: 'query',
        name: `${label(r)}?${query}`,
        request: send(ctx, r.method, `${fill(r.path, ctx)}?${query}`, { json: routeBody(r, ctx) }),
        expected: invalid({ parameter }),
      });
    }
  }
  return out;
}

/** Methods no route takes, odd paths, percent-encoding oddities. */
function routingCases(ctx: CorpusContext): CorpusCase[] {
  const notFound = problem(404, 'not_found_error');
  const cases: Array<[string, string, Expected]> = [
    ['PROPFIND', '/v1/brands', notFound],
    ['TRACE', '/v1/brands', notFound],
    ['QUERY', '/v1/brands', notFound],
    ['M-SEARCH', '/v1/brands', notFound],
    ['OPTIONS', '/v1/contacts', notFound],
    ['PUT', '/v1/contacts', notFound],
    ['DELETE', '/v1/brands', notFound],
    ['PUT', `/v1/contacts/${ctx.md5}`, notFound],
    // DELETE of a contact is an erasure (an extension, test/contacts/contacts-erase.test.ts), not a routing case.
    ['DELETE', '/v1/contact-schema', notFound],
    ['PUT', '/v1/contact-erasures', notFound],
    ['PATCH', '/v1/brands', notFound],
    ['POST', '/v1/contact-schema', notFound],
    ['POST', '/healthz', notFound],
    ['DELETE', '/readyz', notFound],
    ['GET', '/', notFound],
    ['GET', '/v1', notFound],
    ['GET', '/v2/brands', notFound],
    ['GET', '/V1/brands', notFound],
    ['GET', '/v1/Brands', notFound],
    ['GET', '/v1/contacts', notFound],
    ['GET', `/v1/${'a'.repeat(8000)}`, notFound],
    ['GET', `/${'a/'.repeat(3000)}`, notFound],
    ['GET', '/v1/%ZZ', notFound],
    ['GET', '/%00', notFound],
    ['GET', '/v1/brands%2F', notFound],
    ['GET', '/v1%2Fbrands', notFound],
    ['GET', '/v1/brands/%2F', invalid({ parameter: 'brandId' })],
    // Percent-encoded dot segments are dot segments (WHATWG URL): these are GET /v1/brands/ and GET /v1/brands.
    ['GET', `/v1/brands/${ctx.brandId}/%2E%2E`, { kind: 'ok', status: 200 }],
    ['GET', '/v1/contacts/%2e%2e/brands', { kind: 'ok', status: 200 }],
    ['GET', '/v1/brands/%25', invalid({ parameter: 'brandId' })],
    ['GET', '/v1/brands/%', invalid({ parameter: 'brandId' })],
    ['GET', '/v1/brands/%C0%AF', invalid({ parameter: 'brandId' })],
    ['GET', '/v1/brands/%u0041', invalid({ parameter: 'brandId' })],
    ['GET', `/v1/brands/${ctx.brandId}/extra`, notFound],
    ['GET', `/v1/contacts/${ctx.md5}/brands/extra/more`, notFound],
    ['GET', '/docs/%ZZ', notFound],
    ['GET', '/uploads', notFound],
  ];
  return cases.map(([method, target, expected]) => ({
    group: 'routing',
    name: `${method} ${short(target)}`,
    request: send(ctx, method, target, {
      json: method === 'GET' || method === 'DELETE' || method === 'TRACE' ? undefined : {},
    }),
    expected,
  }));
}

/** The upload link: forged, mangled and misused tokens get S3-style XML refusals. */
function uploadCases(ctx: CorpusContext): CorpusCase[] {
  const token = ctx.uploadToken;
  const [payload, mac] = token.split('.') as [string, string];
  const denied: Expected = { kind: 's3', status: 403, code: 'AccessDenied' };
  const tokens = [
    'x',
    '.',
    'a.b',
    `${token}=`,
    `${payload}=.${mac}`,
    `${token}.x`,
    `${payload}.${mac.slice(0, -2)}`,
    `${mac}.${payload}`,
    '%00',
    '..%2F..%2Fetc%2Fpasswd',
    `${token}%00`,
    `${payload}.${'A'.repeat(43)}`,
    'x'.repeat(5000),
  ];
  const out: CorpusCase[] = tokens.map((t) => ({
    group: 'uploads',
    name: `PUT /uploads/${short(t)}`,
    request: httpRequest('PUT', `/uploads/${t}`, { body: 'Email\na@example.com\n' }),
    expected: denied,
  }));
  for (const method of ['GET', 'POST', 'DELETE', 'PATCH']) {
    out.push({
      group: 'uploads',
      name: `${method} on the upload link`,
      request: httpRequest(method, `/uploads/${token}`, method === 'GET' || method === 'DELETE' ? {} : { body: 'x' }),
      expected: { kind: 's3', status: 405, code: 'MethodNotAllowed' },
    });
  }
  return out;
}

/** Host, method, framing and size faults, sent as raw bytes. */
function wireCases(ctx: CorpusContext): CorpusCase[] {
  const auth = { Authorization: `Bearer ${ctx.key}` };
  const out: CorpusCase[] = [];
  const add = (name: string, request: Uint8Array, expected: Expected) =>
    out.push({ group: 'wire', name, request, expected });
  for (const host of ['', 'x', 'x.y', 'a.b.c', '[::1]', 'localhost:1', 'a?b', 'a#b', 'a/b', 'a@b', 'ex ample', '%41']) {
    add(`Host ${JSON.stringify(host)}: a list`, httpRequest('GET', '/v1/brands', { host, headers: auth }), {
      kind: 'ok',
      status: 200,
    });
    add(
      `Host ${JSON.stringify(host)}: a missing brand`,
      httpRequest('GET', `/v1/brands/${UUID}`, { host, headers: auth }),
      problem(404, 'not_found_error'),
    );
    add(
      `Host ${JSON.stringify(host)}: no key`,
      httpRequest('GET', '/v1/contact-schema', { host }),
      problem(401, 'authentication_error'),
    );
  }
  add('HTTP/1.0 without Host: healthz', httpRequest('GET', '/healthz', { host: null, version: 'HTTP/1.0' }), {
    kind: 'ok',
    status: 200,
  });
  add(
    'HTTP/1.0 without Host: no key',
    httpRequest('GET', '/v1/brands', { host: null, version: 'HTTP/1.0' }),
    problem(401, 'authentication_error'),
  );
  add(
    'HTTP/1.0 without Host: unknown route',
    httpRequest('GET', '/nowhere', { host: null, version: 'HTTP/1.0' }),
    problem(404, 'not_found_error'),
  );
  add(
    'HTTP/1.0 without Host: a body fault',
    httpRequest('POST', '/v1/contacts', {
      host: null,
      version: 'HTTP/1.0',
      headers: { ...auth, 'Content-Type': 'application/json' },
      body: '{',
    }),
    invalid(),
  );
  add('two Host headers', httpRequest('GET', '/v1/brands', { host: 'a', headers: { ...auth, Host: 'b' } }), {
    kind: 'ok',
    status: 200,
  });
  add('absolute-form target', httpRequest('GET', 'http://evil.example/v1/brands', { headers: auth }), {
    kind: 'ok',
    status: 200,
  });
  add(
    'a GET with a body',
    httpRequest('GET', '/v1/brands', { headers: { ...auth, 'Content-Type': 'application/json' }, body: '{bad' }),
    { kind: 'ok', status: 200 },
  );
  add(
    'a header with a non-ASCII value',
    httpRequest('GET', '/v1/brands', { headers: { ...auth, 'X-Name': 'Zo\u00eb' } }),
    { kind: 'ok', status: 200 },
  );
  add(
    'an X-Request-Id of 10 kB',
    httpRequest('GET', '/v1/brands', { headers: { ...auth, 'X-Request-Id': 'r'.repeat(10_000) } }),
    { kind: 'ok', status: 200 },
  );
  // Refused by Bun's parser: the app never sees these.
  add('HTTP/1.1 without Host', httpRequest('GET', '/v1/brands', { host: null, headers: auth }), {
    kind: 'runtime',
    status: 400,
  });
  add(
    'Content-Length and Transfer-Encoding',
    httpRequest('POST', '/v1/contacts', {
      headers: { ...auth, 'Content-Length': '5', 'Transfer-Encoding': 'chunked' },
      body: '0\r\n\r\n',
    }),
    { kind: 'runtime', status: 400 },
  );
  add(
    'a non-numeric Content-Length',
    httpRequest('POST', '/v1/contacts', { headers: { ...auth, 'Content-Length': 'abc' }, body: '{}' }),
    { kind: 'runtime', status: 400 },
  );
  add(
    'two different Content-Lengths',
    httpRequest('POST', '/v1/contacts', {
      headers: { ...auth, 'Content-Length': '2', 'content-length': '3' },
      body: '{}',
    }),
    { kind: 'runtime', status: 400 },
  );
  add(
    'a bad chunk size',
    httpRequest('POST', '/v1/contacts', {
      headers: { ...auth, 'Transfer-Encoding': 'chunked' },
      body: 'zz\r\n{}\r\n0\r\n\r\n',
    }),
    { kind: 'runtime', status: 400 },
  );
  add('a header line without a colon', enc(`GET /v1/brands HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n`), {
    kind: 'runtime',
    status: 400,
  });
  // Bun answers these malformed request lines with 505, the one 5xx of the corpus, before the app.
  add('a bare LF request', enc(`GET /v1/brands HTTP/1.1\nHost: localhost\n\n`), { kind: 'runtime', status: 505 });
  add('garbage', enc('HELLO\r\n\r\n'), { kind: 'runtime', status: 400 });
  add('OPTIONS *', httpRequest('OPTIONS', '*'), { kind: 'runtime', status: 400 });
  add('a space in the target', httpRequest('GET', '/v1/bra nds', { headers: auth }), { kind: 'runtime', status: 505 });
  add('a 100 kB header', httpRequest('GET', '/v1/brands', { headers: { ...auth, 'X-Big': 'a'.repeat(100_000) } }), {
    kind: 'runtime',
    status: 431,
  });
  add('a 100 kB path', httpRequest('GET', `/v1/brands/${'a'.repeat(100_000)}`, { headers: auth }), {
    kind: 'runtime',
    status: 431,
  });
  add(
    '1000 headers',
    httpRequest('GET', '/v1/brands', {
      headers: { ...auth, ...Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`X-H${i}`, 'v'])) },
    }),
    { kind: 'runtime', status: 431 },
  );
  add('HTTP/2.0 on HTTP/1 framing', httpRequest('GET', '/v1/brands', { headers: auth, version: 'HTTP/2.0' }), {
    kind: 'runtime',
    status: 505,
  });
  add('HTTP/0.9 request line', enc('GET /v1/brands\r\n\r\n'), { kind: 'runtime', status: 505 });
  add('a space in the method', httpRequest('G ET', '/v1/brands', { headers: auth }), { kind: 'runtime', status: 400 });
  add('a method with a digit', httpRequest('PROPFIND2', '/v1/brands', { headers: auth }), {
    kind: 'runtime',
    status: 400,
  });
  for (const method of ['get', 'Get', 'FOO', 'BREW', 'PURGEALL'])
    add(`method ${method}`, httpRequest(method, '/v1/brands', { headers: auth }), { kind: 'runtime', status: 0 });
  return out;
}

/** The whole corpus. `limit` is the server's BODY_LIMIT_BYTES. */
export function malformedCorpus(ctx: CorpusContext, limit: number): CorpusCase[] {
  return [
    ...keyCases(ctx),
    ...pathCases(ctx),
    ...bodyCases(ctx, limit),
    ...fieldCases(ctx),
    ...attributeCases(ctx),
    ...queryCases(ctx),
    ...routingCases(ctx),
    ...uploadCases(ctx),
    ...wireCases(ctx),
  ];
}

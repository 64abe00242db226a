/**
 * The one reader of attribute values (src/schema/values.ts): API requests and CSV cells read a
 * value by the same rules, and the import's hot loop (worker/import/cells.ts) stores what the reader
 * says. Hostile keys and values (`__proto__`, `constructor`, …) are read like any other.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import type { AttributeType } from '../../src/schema/service';
import { isValueOf, readAttributeValue } from '../../src/schema/values';
import { BrandIndex, RowReader, type Column } from '../../worker/import/cells';
import { testApp, type TestApp } from '../helpers/app';
import { createAttribute } from '../helpers/fixtures';
import { md5, md5ToUuid } from '../contacts/contacts-support';
import { stageImport, tempStore, testConfig } from '../helpers/file-store';
import { runImport } from '../../worker/import/index';

const TYPES: Record<string, AttributeType> = {
  name: 'string',
  n: 'number',
  ok: 'boolean',
  tags: 'array',
  work: 'email',
};
const INTERNAL = [
  '__proto__',
  '__PROTO__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'valueOf',
  '__defineGetter__',
  'isPrototypeOf',
];

const columns: Column[] = [
  { name: 'Email', type: 'identity' },
  ...Object.entries(TYPES).map(([name, type]) => ({ name, type })),
];
const rowReader = new RowReader(columns, new BrandIndex([]), []);

/** What the import stores for one cell of column `name`: a value, not sent, or a malformed row. */
function stagedCell(name: string, cell: string): { value: unknown } | 'empty' | 'malformed' {
  const cells = columns.map((c) => (c.type === 'identity' ? 'a@b.co' : c.name === name ? cell : ''));
  const row = rowReader.read(1, cells);
  if (row === undefined) return 'malformed';
  const attributes = JSON.parse(`{${row.attributes}}`) as Record<string, unknown>;
  return Object.hasOwn(attributes, name) ? { value: attributes[name] } : 'empty';
}

/** The reader's verdict in the same terms. */
function readCell(name: string, cell: string): { value: unknown } | 'empty' | 'malformed' {
  const r = readAttributeValue(TYPES[name]!, cell, name, 'cell');
  return 'error' in r ? 'malformed' : 'empty' in r ? 'empty' : { value: r.value };
}

describe('one reader for requests and cells', () => {
  // One table: the same text sent in a request and in a CSV cell is the same stored value.
  const table: [AttributeType, string, unknown][] = [
    ['boolean', 'yes', true],
    ['boolean', ' FALSE ', false],
    ['boolean', '0', false],
    ['boolean', '__proto__', 'error'],
    ['boolean', 'constructor', 'error'],
    ['boolean', 'toString', 'error'],
    ['number', ' 42 ', 42],
    ['number', '-1.50', -1.5],
    ['number', '1e3', 1000],
    ['number', '0x10', 'error'],
    ['number', 'constructor', 'error'],
    ['array', 'a; b ;;c', ['a', 'b', 'c']],
    ['array', 'x\\;y;z', ['x;y', 'z']],
    ['array', '  solo  ', ['solo']],
    ['array', ' ; ', 'empty'],
    ['array', `${'x'.repeat(256)};y`, 'error'],
    ['string', 'Ann', 'Ann'],
    ['string', '__proto__', '__proto__'],
    ['string', 'x'.repeat(256), 'error'],
    ['string', '😀'.repeat(255), '😀'.repeat(255)],
    ['email', ' w@x.io ', 'w@x.io'],
    ['email', 'constructor', 'error'],
  ];
  const verdict = (r: ReturnType<typeof readAttributeValue>): unknown =>
    'error' in r ? 'error' : 'empty' in r ? 'empty' : r.value;

  test.each(table)('%s %p reads as %p from a request and from a cell', (type, text, expected) => {
    expect(verdict(readAttributeValue(type, text, 'a', 'request'))).toEqual(expected);
    expect(verdict(readAttributeValue(type, text, 'a', 'cell'))).toEqual(expected);
  });

  test('the named difference: a request takes native JSON, a cell is text; both are trimmed alike', () => {
    expect(readAttributeValue('string', '  Ann  ', 'a', 'request')).toEqual({ value: 'Ann' });
    expect(readAttributeValue('string', '  Ann  ', 'a', 'cell')).toEqual({ value: 'Ann' });
    expect(readAttributeValue('string', ' \ufeff\r\n ', 'a', 'request')).toEqual({ empty: true });
    expect(readAttributeValue('boolean', true, 'a', 'request')).toEqual({ value: true });
    expect(readAttributeValue('boolean', true, 'a', 'cell')).toHaveProperty('error');
    expect(readAttributeValue('number', 42, 'a', 'request')).toEqual({ value: 42 });
    // A JSON entry is one entry, trimmed.
    expect(readAttributeValue('array', [' a', 'b;c'], 'a', 'request')).toEqual({ value: ['a', 'b;c'] });
    expect(readAttributeValue('array', ['a'], 'a', 'cell')).toHaveProperty('error');
  });

  test('the other named difference: any cell is at most 255 characters, a request list text only per entry', () => {
    const list = 'ab;'.repeat(100); // 300 characters, every entry 2
    expect(readAttributeValue('array', list, 'a', 'request')).toEqual({ value: Array(100).fill('ab') });
    expect(readAttributeValue('array', list, 'a', 'cell')).toHaveProperty('error');
    expect(stagedCell('tags', list)).toBe('malformed');
    expect(readCell('tags', list)).toBe('malformed');
  });

  test('list entries are trimmed by one rule, from list text and from a JSON array alike', () => {
    expect(readAttributeValue('array', [' a', 'b ', '  ', 'c'], 'a', 'request')).toEqual({ value: ['a', 'b', 'c'] });
    expect(readAttributeValue('array', ' a; b ;  ;c', 'a', 'request')).toEqual({ value: ['a', 'b', 'c'] });
    expect(readAttributeValue('array', [' ', ''], 'a', 'request')).toEqual({ empty: true });
  });

  test('an unpaired surrogate is refused alike by the reader and the hot loop (PostgreSQL stores none)', () => {
    for (const text of ['x\udc00y', '\ud800', 'a;b\udfff']) {
      expect(readCell('name', text)).toBe('malformed');
      expect(stagedCell('name', text)).toBe('malformed');
      expect(readCell('tags', text)).toBe('malformed');
      expect(stagedCell('tags', text)).toBe('malformed');
    }
    expect(stagedCell('name', 'x😀y')).toEqual({ value: 'x😀y' });
  });

  test('the import hot loop stores exactly what the reader reads, for every table value', () => {
    const name = (type: AttributeType) => Object.keys(TYPES).find((k) => TYPES[k] === type)!;
    for (const [type, text] of table) expect(stagedCell(name(type), text)).toEqual(readCell(name(type), text));
  });

  test('property: for any cell text of every type, the hot loop and the reader agree', () => {
    // Lone surrogates too: a request's JSON escapes can send them, and one rule reads both.
    const surrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
    const piece = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 40 }),
      fc.constantFrom(';', '\\;', ' ', '\\', '"'),
      surrogate,
    );
    const cell = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 300 }),
      fc.constantFrom(...INTERNAL, 'yes', 'No', ' 1 ', '2.5', '-0', '1e400', 'a;b', 'a\\;b', ' ; ', 'w@x.io', 'x@y'),
      fc.string({ unit: 'binary', maxLength: 40 }),
      // Lists of many short entries, over 255 characters in all or not.
      fc.array(piece, { maxLength: 30 }).map((p) => p.join('')),
      fc.array(fc.string({ maxLength: 12 }), { minLength: 20, maxLength: 40 }).map((e) => e.join(';')),
    );
    fc.assert(
      fc.property(fc.constantFrom(...Object.keys(TYPES)), cell, (name, text) => {
        // A cell reaches the reader after CSV parsing: never a NUL (the row is malformed for it, checked above the
        // types).
        fc.pre(!text.includes('\0'));
        expect(stagedCell(name, text)).toEqual(readCell(name, text));
      }),
      { numRuns: 2000 },
    );
  });
});

describe('hostile keys and values through the API', () => {
  let t: TestApp;
  let n = 0;
  const fresh = () => `h${++n}@example.com`;
  beforeAll(async () => {
    t = await testApp();
    for (const [name, type] of Object.entries(TYPES)) await createAttribute(t.db.sql, t.accountId, name, type);
  });
  afterAll(() => t.close());

  const post = (attributes: unknown) => t.call('POST', '/v1/contacts', { body: { email: fresh(), attributes } });
  const post2 = (email: string, attributes: unknown) => t.call('POST', '/v1/contacts', { body: { email, attributes } });
  const raw = (method: string, path: string, text: string) =>
    t.call(method, path, { raw: text, headers: { 'content-type': 'application/json' } });

  test.each(['__proto__', '__PROTO__', 'constructor', 'toString'])(
    'a boolean %p is a 400 at /attributes/ok on create and patch, and nothing is stored',
    async (value) => {
      const res = await post({ ok: value });
      expect(res.status).toBe(400);
      expect(res.body.errors).toEqual([{ detail: 'Attribute ok takes true or false.', pointer: '/attributes/ok' }]);
      const email = fresh();
      expect((await t.call('POST', '/v1/contacts', { body: { email } })).status).toBe(201);
      const patched = await t.call('PATCH', `/v1/contacts/${md5(email)}`, { body: { attributes: { ok: value } } });
      expect(patched.status).toBe(400);
      expect(patched.body.errors[0].pointer).toBe('/attributes/ok');
      const got = await t.call('GET', `/v1/contacts/${md5(email)}`);
      expect(got.status).toBe(200);
      expect(got.body.attributes).toEqual({});
    },
  );

  test('an attribute key __proto__ is unknown (400 with its pointer) on create and patch, not dropped', async () => {
    const res = await raw('POST', '/v1/contacts', `{"email":"${fresh()}","attributes":{"__proto__":true}}`);
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual([
      { detail: 'Unknown attribute __proto__: it is not in the contact schema.', pointer: '/attributes/__proto__' },
    ]);
    const email = fresh();
    expect((await t.call('POST', '/v1/contacts', { body: { email } })).status).toBe(201);
    const patched = await raw('PATCH', `/v1/contacts/${md5(email)}`, '{"attributes":{"__proto__":{"ok":true}}}');
    expect(patched.status).toBe(400);
    expect(patched.body.errors[0].pointer).toBe('/attributes/__proto__');
  });

  test.each(['constructor', 'toString', 'hasOwnProperty', 'prototype'])(
    'an attribute key %p is an unknown attribute',
    async (key) => {
      const res = await post({ [key]: 'x' });
      expect(res.status).toBe(400);
      expect(res.body.errors[0].pointer).toBe(`/attributes/${key}`);
    },
  );

  test('JSON array entries are trimmed like list text: the same list either way', async () => {
    const a = fresh();
    const b = fresh();
    expect((await post2(a, { tags: [' x', 'y ', ' '] })).body.attributes.tags).toEqual(['x', 'y']);
    expect((await post2(b, { tags: ' x; y ; ' })).body.attributes.tags).toEqual(['x', 'y']);
  });

  test('text is trimmed as the importer trims a cell, on create and patch; only spaces is empty', async () => {
    const email = fresh();
    const created = await post2(email, { name: '  padded  ', work: ' W@X.IO\r\n' });
    expect(created.status).toBe(201);
    expect(created.body.attributes).toMatchObject({ name: 'padded', work: 'W@X.IO' });
    expect((await post2(fresh(), { name: ' \ufeff\t' })).body.attributes).toEqual({});
    const path = `/v1/contacts/${md5(email)}`;
    const patched = await t.call('PATCH', path, { body: { attributes: { name: '\ufeffline\nbreak\u00a0' } } });
    expect(patched.body.attributes.name).toBe('line\nbreak');
    const blank = await t.call('PATCH', path, { body: { attributes: { name: ' \r\n ' } } });
    expect(blank.status).toBe(400);
    expect(blank.body.errors).toEqual([
      { detail: 'Attribute name is empty: send a value, or null to remove it.', pointer: '/attributes/name' },
    ]);
  });

  test('stored attributes that are no object at all (a row written by hand) read as none, not a 500', async () => {
    const email = fresh();
    expect((await t.call('POST', '/v1/contacts', { body: { email, attributes: { name: 'Ann' } } })).status).toBe(201);
    for (const stored of ['null', '[1, "x"]', '"text"']) {
      await t.db.sql`
        update contacts set attributes = ${stored}::jsonb
        where account_id = ${t.accountId} and email_md5 = ${md5ToUuid(md5(email))}`;
      const got = await t.call('GET', `/v1/contacts/${md5(email)}`);
      expect(got.status).toBe(200);
      expect(got.body.attributes).toEqual({});
    }
  });

  test('a value not of its type written by other hands is left out of GET, and PATCH still works', async () => {
    const email = fresh();
    expect((await t.call('POST', '/v1/contacts', { body: { email, attributes: { name: 'Ann' } } })).status).toBe(201);
    await t.db.sql`
      update contacts set attributes = '{"ok": {}, "n": "x", "tags": [1], "name": "Ann", "toString": "kept"}'::jsonb
      where account_id = ${t.accountId} and email_md5 = ${md5ToUuid(md5(email))}`;
    const got = await t.call('GET', `/v1/contacts/${md5(email)}`);
    expect(got.status).toBe(200);
    expect(got.body.attributes).toEqual({ name: 'Ann', toString: 'kept' });
    const patched = await t.call('PATCH', `/v1/contacts/${md5(email)}`, { body: { attributes: { ok: true } } });
    expect(patched.status).toBe(200);
    expect(patched.body.attributes).toEqual({ name: 'Ann', ok: true, toString: 'kept' });
  });

  test('property: any JSON attributes on create/patch answer 2xx or 400; what is stored reads back typed', async () => {
    const key = fc.oneof(
      fc.constantFrom(...Object.keys(TYPES), ...INTERNAL, 'Email', 'Brand', 'work:md5', 'NAME'),
      fc.string({ maxLength: 12 }),
    );
    const value = fc.oneof(
      fc.jsonValue({ maxDepth: 2 }),
      fc.constantFrom(...INTERNAL, 'yes', '42', 'a;b', 'w@x.io', ''),
      fc.constant(null),
    );
    const attributes = fc.dictionary(key, value, { maxKeys: 4 });
    const check = async (email: string, status: number) => {
      expect([200, 201, 400]).toContain(status);
      const got = await t.call('GET', `/v1/contacts/${md5(email)}`);
      if (got.status === 404) return;
      expect(got.status).toBe(200);
      for (const [name, type] of Object.entries(TYPES))
        if (Object.hasOwn(got.body.attributes, name)) expect(isValueOf(type, got.body.attributes[name])).toBe(true);
    };
    await fc.assert(
      fc.asyncProperty(attributes, attributes, async (onCreate, onPatch) => {
        const email = fresh();
        // The raw text, so a `__proto__` key stays an own key of the sent object.
        const created = await raw('POST', '/v1/contacts', JSON.stringify({ email, attributes: onCreate }));
        await check(email, created.status);
        if (created.status >= 300) expect((await t.call('GET', `/v1/contacts/${md5(email)}`)).status).toBe(404);
        else {
          const patched = await raw('PATCH', `/v1/contacts/${md5(email)}`, JSON.stringify({ attributes: onPatch }));
          await check(email, patched.status);
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe('hostile cells through a real import', () => {
  let t: TestApp;
  let files: Awaited<ReturnType<typeof tempStore>>;
  beforeAll(async () => {
    t = await testApp();
    files = await tempStore();
    for (const [name, type] of Object.entries(TYPES)) await createAttribute(t.db.sql, t.accountId, name, type);
  });
  afterAll(async () => {
    await t.close();
    await files.remove();
  });

  test('property: any cells of every type import to attributes of their type, as the reader reads them', async () => {
    const cell = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 60 }),
      fc.constantFrom(...INTERNAL, 'yes', '1e3', 'a;b\\;c', 'w@x.io', ''),
    );
    const rows = fc.sample(fc.array(cell, { minLength: 5, maxLength: 5 }), { numRuns: 300, seed: 11 });
    const quote = (c: string) => `"${c.replaceAll('"', '""')}"`;
    const names = Object.keys(TYPES);
    const csv = [
      ['Email', ...names].join(','),
      ...rows.map((cells, i) => [`r${i}@example.com`, ...cells].map(quote).join(',')),
    ].join('\r\n');
    const id = await stageImport(t.db.sql, files.store, t.accountId, csv, { columns: ['Email', ...names] });
    await runImport({ sql: t.db.sql, storage: files.store, config: testConfig(50) }, t.accountId, id);
    const [imp] = await t.db.sql<{ status: string; added: number; malformed: number }[]>`
      select status, added_count as added, malformed_count as malformed from contact_imports where id = ${id}`;
    expect(imp!.status).toBe('success');
    // Expected per row: malformed when any cell is (or holds a NUL), else each attribute as the reader reads it.
    const expected = rows.map((cells) => {
      const got = cells.map((c, k) => (c.includes('\0') ? 'malformed' : readCell(names[k]!, c)));
      return got.includes('malformed')
        ? undefined
        : Object.fromEntries(got.flatMap((g, k) => (typeof g === 'object' ? [[names[k]!, g.value]] : [])));
    });
    expect(imp!.malformed).toBe(expected.filter((e) => e === undefined).length);
    expect(imp!.added).toBe(expected.filter((e) => e !== undefined).length);
    for (const [i, attributes] of expected.entries()) {
      const got = await t.call('GET', `/v1/contacts/${md5(`r${i}@example.com`)}`);
      if (attributes === undefined) {
        expect(got.status).toBe(404);
        continue;
      }
      expect(got.status).toBe(200);
      const { 'work:md5': _a, 'work:sha256': _b, 'work:sha512': _c, 'work:domain': _d, ...plain } = got.body.attributes;
      expect(plain).toEqual(attributes);
      for (const [name, type] of Object.entries(TYPES))
        if (Object.hasOwn(plain, name)) expect(isValueOf(type, plain[name])).toBe(true);
    }
  });
});

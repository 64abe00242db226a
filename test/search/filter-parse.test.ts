/**
 * The filter language's rules (src/search/filter.ts): every rule broken is one 400
 * invalid_request_error whose field error points at the node, or the part of it, at fault.
 */
import { describe, expect, test } from 'bun:test';
import { ApiError } from '../../src/errors';
import { brandIdsOf, filterKey, instantOf, parseFilter, type FilterSchema } from '../../src/search/filter';

const schema: FilterSchema = {
  custom: [
    { name: 'firstName', type: 'string' },
    { name: 'Age', type: 'number' },
    { name: 'vip', type: 'boolean' },
    { name: 'altEmail', type: 'email' },
    { name: 'tags', type: 'array' },
  ],
};
const BRAND = '6F1C2A3B-4D5E-4F60-8a7b-9c0d1e2f3a4b';

/** The one field error a filter is refused with. */
function refusal(raw: unknown, at?: string): { pointer?: string; detail: string } {
  try {
    parseFilter(raw, schema, at);
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    const error = e as ApiError;
    expect(error.code).toBe('invalid_request_error');
    expect(error.status).toBe(400);
    expect(error.errors).toHaveLength(1);
    return error.errors![0]! as { pointer?: string; detail: string };
  }
  throw new Error(`accepted: ${JSON.stringify(raw)}`);
}

const pointerOf = (raw: unknown, at?: string) => refusal(raw, at).pointer;
const leaf = (attribute: unknown, op: unknown, value?: unknown) =>
  value === undefined ? { attribute, op } : { attribute, op, value };

describe('node forms', () => {
  test('a non-object, null, an array or an empty object points at the node', () => {
    for (const raw of [null, 3, 'x', [], {}, true]) expect(pointerOf(raw)).toBe('/filter');
    expect(pointerOf({ and: [{ enabled: true }, null] })).toBe('/filter/and/1');
    expect(pointerOf({ not: [] })).toBe('/filter/not');
  });

  test('two forms in one object, or an unknown key, point at the node', () => {
    expect(pointerOf({ and: [{ enabled: true }], or: [{ enabled: true }] })).toBe('/filter');
    expect(pointerOf({ enabled: true, attribute: 'Age', op: 'exists' })).toBe('/filter');
    expect(pointerOf({ or: [{ enabled: true, colour: 'red' }] })).toBe('/filter/or/0');
    expect(pointerOf({ AND: [{ enabled: true }] })).toBe('/filter');
    const detail = refusal({ enabled: true, colour: 1 }).detail;
    expect(detail).toContain('"colour"');
    expect(detail).toContain('exactly one of these forms');
  });

  test('and / or take 1 to 20 filters, else the list is at fault', () => {
    expect(pointerOf({ and: [] })).toBe('/filter/and');
    expect(pointerOf({ or: {} })).toBe('/filter/or');
    expect(pointerOf({ not: { and: Array(21).fill({ enabled: true }) } })).toBe('/filter/not/and');
    expect(refusal({ and: [] }).detail).toContain('1 to 20');
    expect(parseFilter({ or: Array(20).fill({ enabled: true }) }, schema).kind).toBe('or');
  });

  test('enabled takes a boolean', () => {
    expect(parseFilter({ enabled: false }, schema)).toEqual({ kind: 'enabled', value: false, at: '/filter' });
    expect(pointerOf({ and: [{ enabled: 'false' }] })).toBe('/filter/and/0/enabled');
  });

  test('the pointer of the filter in the body is the caller’s', () => {
    expect(pointerOf({ and: [{ enabled: 1 }] }, '/query')).toBe('/query/and/0/enabled');
    expect(parseFilter({ not: { enabled: true } }, schema, '/q')).toEqual({
      kind: 'not',
      of: { kind: 'enabled', value: true, at: '/q/not' },
      at: '/q',
    });
  });
});

describe('createdAt', () => {
  test('takes gte, lt or both as RFC 3339 date-times with a time zone', () => {
    const node = parseFilter({ createdAt: { gte: '2026-01-02T03:04:05Z', lt: '2026-02-01T00:00:00.5+02:00' } }, schema);
    expect(node).toEqual({
      kind: 'createdAt',
      gte: '2026-01-02T03:04:05Z',
      lt: '2026-02-01T00:00:00.5+02:00',
      at: '/filter',
    });
    expect(parseFilter({ createdAt: { lt: '2024-02-29t23:59:59.123456-11:30' } }, schema).kind).toBe('createdAt');
  });

  test('no bound, an unknown key or a non-object points at createdAt', () => {
    expect(pointerOf({ createdAt: {} })).toBe('/filter/createdAt');
    expect(pointerOf({ createdAt: { gte: '2026-01-02T03:04:05Z', gt: '2026-01-02T03:04:05Z' } })).toBe(
      '/filter/createdAt',
    );
    expect(pointerOf({ not: { createdAt: '2026-01-02T03:04:05Z' } })).toBe('/filter/not/createdAt');
  });

  test('a bound that is no real instant points at the bound', () => {
    const bad = [
      '2026-01-02',
      '2026-01-02T03:04:05',
      '2026-01-02 03:04:05Z',
      '2026-02-29T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-01-01T24:00:00Z',
      '2026-06-30T23:59:60Z',
      '2026-01-01T00:00:00+24:00',
      '2026-01-01T00:00:00.Z',
      '0000-01-01T00:00:00Z',
      1767322800000,
    ];
    for (const gte of bad) expect(pointerOf({ createdAt: { gte } })).toBe('/filter/createdAt/gte');
    expect(pointerOf({ createdAt: { gte: '2026-01-02T03:04:05Z', lt: 'tomorrow' } })).toBe('/filter/createdAt/lt');
    expect(refusal({ createdAt: { lt: 'x' } }).detail).toContain('RFC 3339');
  });

  test('instantOf reads offsets and drops digits past the millisecond', () => {
    expect(instantOf('2026-01-02T05:04:05.1239+02:00')).toBe(Date.UTC(2026, 0, 2, 3, 4, 5, 123));
    expect(instantOf('2026-01-01T23:30:00-01:00')).toBe(Date.UTC(2026, 0, 2, 0, 30));
    expect(instantOf('0099-03-01T00:00:00Z')).toBe(new Date('0099-03-01T00:00:00Z').getTime());
    expect(instantOf('2000-02-29T00:00:00Z')).toBe(Date.UTC(2000, 1, 29));
    expect(instantOf('1900-02-29T00:00:00Z')).toBeUndefined();
  });
});

describe('attribute leaves', () => {
  test('names resolve case-insensitively to the schema’s spelling', () => {
    expect(parseFilter(leaf('AGE', 'gt', 30), schema)).toEqual({
      kind: 'compare',
      target: { kind: 'custom', name: 'Age', type: 'number' },
      op: 'gt',
      value: 30,
      at: '/filter',
    });
    expect(parseFilter(leaf('email', 'exists'), schema)).toEqual({
      kind: 'exists',
      target: { kind: 'email' },
      at: '/filter',
    });
    expect(parseFilter(leaf('ALTEMAIL:Domain', 'eq', 'x.com'), schema)).toMatchObject({
      target: { kind: 'derived', name: 'altEmail', key: 'domain' },
    });
  });

  test('an unknown attribute or a non-string name points at attribute', () => {
    for (const name of ['nope', 'firstName:md5', 'altEmail:sha1', 'Email:md5', ':md5', 'altEmail:', 3, null])
      expect(pointerOf({ and: [leaf(name, 'exists')] })).toBe('/filter/and/0/attribute');
    expect(pointerOf({ op: 'exists' })).toBe('/filter/attribute');
    expect(refusal(leaf('nope', 'exists')).detail).toContain('Unknown attribute "nope"');
  });

  test('an operator the type does not take points at op and names those it takes', () => {
    expect(pointerOf({ and: [{ enabled: true }, { enabled: true }, leaf('firstName', 'gt', 'a')] })).toBe(
      '/filter/and/2/op',
    );
    expect(refusal(leaf('vip', 'ne', true)).detail).toBe('Attribute vip (boolean) takes the operators exists, eq.');
    expect(refusal(leaf('Email', 'prefix', 'a')).detail).toContain('exists, eq, in, domain');
    expect(refusal(leaf('Brand', 'eq', BRAND)).pointer).toBe('/filter/op');
    expect(refusal(leaf('altEmail:md5', 'domain', 'x')).pointer).toBe('/filter/op');
    expect(pointerOf({ attribute: 'Age' })).toBe('/filter/op');
    expect(pointerOf(leaf('Age', 'GT', 1))).toBe('/filter/op');
  });

  test('exists takes no value; every other operator needs one', () => {
    expect(pointerOf(leaf('Age', 'exists', 1))).toBe('/filter/value');
    expect(pointerOf({ attribute: 'Age', op: 'exists', value: null })).toBe('/filter/value');
    expect(pointerOf(leaf('Age', 'eq'))).toBe('/filter/value');
    expect(pointerOf({ attribute: 'Age', op: 'eq', value: null })).toBe('/filter/value');
  });
});

describe('values', () => {
  const long = 'x'.repeat(256);

  test('string operators take a string of 1 to 255 characters', () => {
    expect(parseFilter(leaf('firstName', 'prefix', 'x'.repeat(255)), schema).kind).toBe('compare');
    // 255 code points, each two UTF-16 units
    expect(parseFilter(leaf('firstName', 'eq', '😀'.repeat(255)), schema).kind).toBe('compare');
    for (const value of ['', long, 3, true, ['a'], 'a\0b', '\ud800'])
      expect(pointerOf(leaf('firstName', 'eq', value))).toBe('/filter/value');
    expect(pointerOf(leaf('altEmail:sha256', 'ne', 1))).toBe('/filter/value');
    expect(refusal(leaf('firstName', 'prefix', '')).detail).toBe(
      'The value of prefix on firstName (string) must be a string of 1 to 255 characters.',
    );
  });

  test('in takes 1 to 100 values of the type; an entry at fault is pointed at', () => {
    expect(parseFilter(leaf('Age', 'in', [1, 2.5, -3]), schema)).toMatchObject({ value: [1, 2.5, -3] });
    expect(pointerOf(leaf('Age', 'in', []))).toBe('/filter/value');
    expect(pointerOf(leaf('Age', 'in', Array(101).fill(1)))).toBe('/filter/value');
    expect(pointerOf(leaf('Age', 'in', 1))).toBe('/filter/value');
    expect(pointerOf(leaf('Age', 'in', [1, '2']))).toBe('/filter/value/1');
    expect(pointerOf(leaf('firstName', 'in', ['a', '', 'b']))).toBe('/filter/value/1');
    expect(pointerOf(leaf('Email', 'in', ['a@b.co', 7]))).toBe('/filter/value/1');
    expect(refusal(leaf('Age', 'in', [1, '2'])).detail).toBe(
      'Entry 1 of the value of in on Age (number) must be a finite JSON number (not a string).',
    );
  });

  test('number operators take a finite JSON number, not a numeric string', () => {
    for (const op of ['eq', 'ne', 'gt', 'gte', 'lt', 'lte'])
      expect(parseFilter(leaf('Age', op, 0.5), schema)).toMatchObject({ op, value: 0.5 });
    for (const value of ['30', Infinity, NaN, true, null])
      expect(pointerOf(leaf('Age', 'gt', value))).toBe('/filter/value');
  });

  test('boolean eq takes a JSON boolean', () => {
    expect(parseFilter(leaf('vip', 'eq', false), schema)).toMatchObject({ value: false });
    for (const value of ['true', 1, 0]) expect(pointerOf(leaf('vip', 'eq', value))).toBe('/filter/value');
  });

  test('email eq and domain take a string of 1 to 255 characters', () => {
    expect(parseFilter(leaf('altEmail', 'domain', 'Example.COM'), schema)).toMatchObject({ value: 'Example.COM' });
    expect(pointerOf(leaf('Email', 'eq', long))).toBe('/filter/value');
    expect(pointerOf(leaf('altEmail', 'domain', ''))).toBe('/filter/value');
  });

  test('array contains takes one string, containsAny 1 to 100', () => {
    expect(parseFilter(leaf('tags', 'contains', 'red'), schema)).toMatchObject({ value: 'red' });
    expect(pointerOf(leaf('tags', 'contains', ['red']))).toBe('/filter/value');
    expect(pointerOf(leaf('tags', 'containsAny', 'red'))).toBe('/filter/value');
    expect(pointerOf(leaf('tags', 'containsAny', []))).toBe('/filter/value');
    expect(pointerOf(leaf('tags', 'containsAny', ['a', long]))).toBe('/filter/value/1');
  });

  test('Brand takes UUIDs, lowercased', () => {
    expect(parseFilter(leaf('brand', 'contains', BRAND), schema)).toMatchObject({ value: BRAND.toLowerCase() });
    expect(parseFilter(leaf('Brand', 'containsAny', [BRAND]), schema)).toMatchObject({ value: [BRAND.toLowerCase()] });
    expect(pointerOf(leaf('Brand', 'contains', 'Blue'))).toBe('/filter/value');
    expect(pointerOf(leaf('Brand', 'containsAny', [BRAND, 'Blue']))).toBe('/filter/value/1');
    expect(refusal(leaf('Brand', 'contains', 'Blue')).detail).toContain('a brand id (a UUID)');
  });
});

describe('limits', () => {
  const deep = (levels: number): unknown => (levels === 1 ? { enabled: true } : { not: deep(levels - 1) });

  test('5 levels deep are accepted, 6 are refused at the filter', () => {
    expect(parseFilter({ and: [{ or: [{ not: { and: [{ enabled: true }] } }] }] }, schema).kind).toBe('and');
    expect(parseFilter(deep(5), schema).kind).toBe('not');
    expect(refusal(deep(6))).toEqual({
      pointer: '/filter',
      detail: 'A filter nests at most 5 levels deep (the root is level 1).',
    });
    expect(pointerOf({ and: [{ enabled: true }, deep(5)] }, '/body/filter')).toBe('/body/filter');
  });

  test('50 leaves are accepted, 51 are refused at the filter', () => {
    const group = (n: number) => ({ or: Array(n).fill(leaf('Age', 'exists')) });
    expect(parseFilter({ and: [group(20), group(20), group(10)] }, schema).kind).toBe('and');
    const over = refusal({ and: [group(20), group(20), group(11)] });
    expect(over).toEqual({ pointer: '/filter', detail: 'A filter has at most 50 conditions (leaves) in all.' });
  });
});

describe('brandIdsOf', () => {
  test('lists the brand ids of contains and containsAny with their pointers', () => {
    const other = '00000000-0000-4000-8000-000000000001';
    const node = parseFilter(
      {
        and: [
          leaf('Brand', 'contains', BRAND),
          { not: leaf('brand', 'containsAny', [other, BRAND]) },
          leaf('tags', 'contains', 'x'),
          leaf('Brand', 'exists'),
        ],
      },
      schema,
    );
    expect(brandIdsOf(node)).toEqual([
      { id: BRAND.toLowerCase(), at: '/filter/and/0/value' },
      { id: other, at: '/filter/and/1/not/value/0' },
      { id: BRAND.toLowerCase(), at: '/filter/and/1/not/value/1' },
    ]);
  });
});

describe('filterKey', () => {
  test('the same filter in other key order and name case has the same key', () => {
    const a = parseFilter(
      { and: [{ attribute: 'age', op: 'gt', value: 3 }, { createdAt: { gte: '2026-01-02T03:04:05Z' } }] },
      schema,
    );
    const b = parseFilter(
      { and: [{ value: 3, op: 'gt', attribute: 'AGE' }, { createdAt: { gte: '2026-01-02T05:04:05+02:00' } }] },
      schema,
      '/other',
    );
    expect(filterKey(a)).toBe(filterKey(b));
  });

  test('another filter, or none, has another key', () => {
    const keys = [
      undefined,
      { enabled: true },
      { enabled: false },
      { not: { enabled: true } },
      { and: [{ enabled: true }] },
      { or: [{ enabled: true }] },
      leaf('Age', 'gt', 3),
      leaf('Age', 'gte', 3),
      leaf('Age', 'exists'),
      leaf('altEmail', 'exists'),
      leaf('altEmail:md5', 'exists'),
      leaf('firstName', 'in', ['a']),
    ].map((raw) => filterKey(raw === undefined ? undefined : parseFilter(raw, schema)));
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys[0]).toBe('');
  });
});

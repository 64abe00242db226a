/** The pure parts of the import pipeline: cell reading and the header check. No database. */
import { describe, expect, test } from 'bun:test';
import { isValidEmail } from '../../src/contacts/email';
import { BrandIndex, RowReader, type Column } from '../../worker/import/cells';
import { jsonString, readBoolean, readNumber, splitList, tooLong, validEmail } from '../../src/schema/values';
import { headerMismatch } from '../../worker/import/columns';

const ALPHA = '11111111-1111-4111-8111-111111111111';
const SEMI = '22222222-2222-4222-8222-222222222222';
const brands = new BrandIndex([
  { id: ALPHA, name: 'Alpha' },
  { id: SEMI, name: 'Beta;Gamma' },
]);
const columns: Column[] = [
  { name: 'Email', type: 'identity' },
  { name: 'name', type: 'string' },
  { name: 'n', type: 'number' },
  { name: 'ok', type: 'boolean' },
  { name: 'tags', type: 'array' },
  { name: 'work', type: 'email' },
  { name: 'Brand', type: 'brand' },
];
const reader = new RowReader(columns, brands, []);

/** The staging fields of a row, as the COPY's text would spell them, or undefined when malformed. */
function read(cells: string[], r = reader) {
  const row = r.read(7, cells);
  if (row === undefined) return undefined;
  return {
    rowNo: String(row.rowNo),
    md5: Buffer.from(row.md5).toString('hex'),
    email: row.email,
    attributes: JSON.parse(`{${row.attributes}}`),
    brandIds: `{${(row.brandIds ?? []).join(',')}}`,
    attributeCount: String(row.attributeCount),
  };
}

describe('cells', () => {
  test(
    'a row becomes its staging fields: row number, md5 of the lowercased address, trimmed address, ' +
      'typed attributes, brands, attributes sent',
    () => {
      expect(read([' Ann@Example.com ', ' Ann ', '42', 'YES', 'a; b ;;c', 'w@x.io', 'alpha'])).toEqual({
        rowNo: '7',
        md5: new Bun.CryptoHasher('md5').update('ann@example.com').digest('hex'),
        email: 'Ann@Example.com',
        attributes: { name: 'Ann', n: 42, ok: true, tags: ['a', 'b', 'c'], work: 'w@x.io' },
        brandIds: `{${ALPHA}}`,
        attributeCount: '5',
      });
    },
  );

  test('empty and blank cells are not sent', () => {
    expect(read(['a@b.co', '', '  ', '', ' ; ', '', ''])).toMatchObject({
      attributes: {},
      brandIds: '{}',
      attributeCount: '0',
    });
    expect(read(['a@b.co', 'Ann', '', '', ' ; ', 'w@x.io', 'alpha'])).toMatchObject({
      attributes: { name: 'Ann', work: 'w@x.io' },
      attributeCount: '2',
    });
  });

  test('a missing or invalid address, a wrong field count, a bad typed value make the row malformed', () => {
    const good = ['a@b.co', '', '', '', '', '', ''];
    expect(read(good)).toBeDefined();
    expect(read(['', ...good.slice(1)])).toBeUndefined();
    expect(read(['nope', ...good.slice(1)])).toBeUndefined();
    expect(read(good.slice(1))).toBeUndefined();
    expect(read([...good, 'extra'])).toBeUndefined();
    expect(read(['a@b.co', '', '1,5', '', '', '', ''])).toBeUndefined();
    expect(read(['a@b.co', '', '', 'maybe', '', '', ''])).toBeUndefined();
    expect(read(['a@b.co', '', '', '', '', 'not-an-address', ''])).toBeUndefined();
    expect(read(['a@b.co', 'nul\0', '', '', '', '', ''])).toBeUndefined();
    // A NUL in a cell of any type makes the row malformed (PostgreSQL cannot store it).
    const withNul = ['a\0@b.co', 'x\0', '4\0', 'yes\0', 'a;b\0', 'w\0@x.io', 'Alpha\0'];
    for (let i = 0; i < withNul.length; i++) {
      const cells = ['a@b.co', '', '', '', '', '', ''];
      cells[i] = withNul[i]!;
      expect(read(cells)).toBeUndefined();
    }
  });

  test('text is kept as written: quotes, backslashes, tabs, newlines, non-ASCII', () => {
    const name = 'a "q" \\ b\tc\nd é 😀';
    expect(read(['a@b.co', name, '', '', '', '', ''])!.attributes).toEqual({ name });
  });

  test('over 255 characters is malformed, counted in code points', () => {
    const ok = (s: string) => read(['a@b.co', s, '', '', '', '', '']) !== undefined;
    expect(ok('x'.repeat(255))).toBe(true);
    expect(ok('x'.repeat(256))).toBe(false);
    expect(ok('😀'.repeat(255))).toBe(true);
    expect(ok('😀'.repeat(256))).toBe(false);
    expect(tooLong('😀'.repeat(200) + 'x'.repeat(55))).toBe(false);
    const entry = (s: string) => read(['a@b.co', '', '', '', s, '', '']) !== undefined;
    expect(entry(`${'x'.repeat(200)};${'y'.repeat(50)}`)).toBe(true);
    expect(entry(`${'x'.repeat(256)}`)).toBe(false);
  });

  test('numbers: decimal, signed, exponent; nothing else', () => {
    expect(['1', '-2.5', '+3', '.5', '4.', '1e3', '2E-2', '007'].map(readNumber)).toEqual([
      '1',
      '-2.5',
      '3',
      '0.5',
      '4',
      '1000',
      '0.02',
      '7',
    ]);
    for (const bad of ['', '-', '.', 'e3', '1e', '1,5', '0x10', 'Infinity', 'NaN', '1e999', '1 2'])
      expect(readNumber(bad)).toBeUndefined();
    // The fast path (canonical cells returned as they are) agrees with String(Number(cell)) everywhere.
    const edge = [
      '10',
      '1.05',
      '1.50',
      '12.',
      '-0.5',
      '-7',
      '0',
      '00',
      '1..2',
      '1.2.3',
      '123456789012345',
      '1234567890.12345',
      '1234567890123456',
      '9007199254740993',
      '999999999999999.9',
      '1.000000000000001',
      '-123456789012345',
      '5e-7',
      '100000000000000000000000',
    ];
    for (const cell of edge)
      expect(readNumber(cell)).toBe(Number.isFinite(Number(cell)) && cell !== '' ? String(Number(cell)) : undefined);
    for (let i = 0; i < 20_000; i++) {
      const cell =
        (Math.random() < 0.3 ? '-' : '') +
        (Math.random() * 10 ** Math.floor(Math.random() * 18)).toFixed(Math.floor(Math.random() * 6));
      expect(readNumber(cell)).toBe(String(Number(cell)));
    }
  });

  test('booleans: true/false/yes/no/1/0 in any case', () => {
    expect(['TRUE', 'yes', '1', 'False', 'NO', '0'].map(readBoolean)).toEqual([
      'true',
      'true',
      'true',
      'false',
      'false',
      'false',
    ]);
    for (const bad of ['y', 'n', 'on', '2', 'truee']) expect(readBoolean(bad)).toBeUndefined();
  });

  test('lists split on ; with \\; for a literal semicolon; entries trimmed, empty ones dropped', () => {
    expect(splitList('a')).toEqual(['a']);
    expect(splitList(' a ; b\\;c ;; d\\x ')).toEqual(['a', 'b;c', 'd\\x']);
    expect(splitList(';;')).toEqual([]);
  });

  test('brands: names (any case) or ids, \\; in names, repeats once, import brands added; unknown is malformed', () => {
    const r = new RowReader(columns, brands, [SEMI, ALPHA]);
    expect(read(['a@b.co', '', '', '', '', '', `ALPHA;${ALPHA.toUpperCase()};beta\\;gamma`])!.brandIds).toBe(
      `{${ALPHA},${SEMI}}`,
    );
    expect(read(['a@b.co', '', '', '', '', '', ''], r)!.brandIds).toBe(`{${SEMI},${ALPHA}}`);
    expect(read(['a@b.co', '', '', '', '', '', 'Beta'])).toBeUndefined();
    expect(read(['a@b.co', '', '', '', '', '', 'alpha;nobody'])).toBeUndefined();
  });
});

describe('jsonString', () => {
  test('is JSON.stringify for any string', () => {
    for (const s of [
      '',
      'plain',
      'a"b',
      'back\\slash',
      'tab\there',
      'nl\n',
      '\u0001',
      'é ü 中文',
      '😀',
      '\ud83d',
      'x\ude00y',
      '\u2028',
      '\u007f',
    ])
      expect(jsonString(s)).toBe(JSON.stringify(s));
  });
});

describe('email rule', () => {
  test('the fast scan agrees with the service rule (isValidEmail) on edge cases and random strings', () => {
    const edge = [
      'a@b.co',
      'a@b',
      '@b.co',
      'a@',
      'a@@b.co',
      'a@b..co',
      'a@.b.co',
      'a@b.co.',
      'a@-b.co',
      'a@b-.co',
      'a@b-c.co',
      'a b@c.co',
      'é@b.co',
      'a@bé.co',
      `${'a'.repeat(64)}@b.co`,
      `${'a'.repeat(65)}@b.co`,
      `a@${'b'.repeat(63)}.co`,
      `a@${'b'.repeat(64)}.co`,
      `a@${'b.'.repeat(126)}co`,
      `a@${'b.'.repeat(125)}co`,
      "!#$%&'*+/=?^_`{|}~-.@x.y",
      'a\\b@c.co',
      'a"b@c.co',
      'a@b_c.co',
      '',
    ];
    for (const e of edge) expect([e, validEmail(e)]).toEqual([e, isValidEmail(e)]);
    const alphabet = 'aZ09@@..--_+ é\\"!~';
    let seed = 42;
    const rand = (n: number) => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n;
    for (let k = 0; k < 50_000; k++) {
      let e = '';
      for (let i = rand(24); i > 0; i--) e += alphabet[rand(alphabet.length)];
      expect([e, validEmail(e)]).toEqual([e, isValidEmail(e)]);
    }
  });
});

describe('header', () => {
  const cols: Column[] = [
    { name: 'Email', type: 'identity' },
    { name: 'firstName', type: 'string' },
    { name: 'lastName', type: 'string' },
  ];

  test('matches ignoring case and surrounding whitespace', () => {
    expect(headerMismatch([' EMAIL', 'firstname ', 'LastName'], cols)).toBeUndefined();
  });

  test('names the first mismatch', () => {
    expect(headerMismatch(['Email', 'firstName', 'foo'], cols)).toBe('Header column 3 is "foo", expected "lastName".');
    expect(headerMismatch(['Email', 'lastName', 'firstName'], cols)).toBe(
      'Header column 2 is "lastName", expected "firstName".',
    );
    expect(headerMismatch(['Email', 'firstName'], cols)).toBe('Header column 3 is missing, expected "lastName".');
    expect(headerMismatch(['Email', 'firstName', 'lastName', 'x'], cols)).toBe(
      'Header column 4 is "x", but only 3 columns were declared.',
    );
  });
});

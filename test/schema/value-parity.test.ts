/**
 * Value parity (issue 12). Attribute values are read by one reader (src/schema/values.ts), called
 * for a request by src/contacts/attributes.ts and for a file by the import's hot loop
 * (worker/import/cells.ts). One table of values, each given as a request value (JSON) and as a CSV
 * cell (text) that mean the same, goes through both real paths: POST /v1/contacts of a new contact,
 * and a row of one contact import. What is stored must be the same, and a refusal must be one on
 * both sides: the API's 400 at /attributes/<name>, the import's malformed row.
 *
 * Where the two are meant to differ, the row says so and names the rule (ValueSource): a cell is
 * at most 255 characters whatever its type (a request's number or list text is not). The spaces
 * around a value are one rule for both (textToRead, issue 54): trimmed, a `string` value's too.
 * A request's native JSON values (true, 42, ["a"]) mean what their text means in a cell; the rows
 * pair them. A few request values have no cell at all (a file is UTF-8 text): they are checked on
 * the API alone, with the reason.
 */
import { describe, expect, test } from 'bun:test';
import { createAttribute } from '../helpers/fixtures';
import { csvLine, importThrough, parityBed, storedContacts } from '../helpers/parity';

const bed = parityBed();

const ATTRIBUTES = { name: 'string', work: 'email', score: 'number', vip: 'boolean', tags: 'array' } as const;
type Attribute = keyof typeof ATTRIBUTES;
const COLUMNS = ['Email', ...Object.keys(ATTRIBUTES)];

/** What a path made of a value: stored, left unanswered, or refused. */
type Got = { stored: unknown } | 'not sent' | 'refused';
const NOT_SENT = 'not sent';
const REFUSED = 'refused';
const stored = (value: unknown): Got => ({ stored: value });

/** The ValueSource rule a row may name. */
const CELL_LIMIT = 'a cell is at most 255 characters whatever its type';

interface Row {
  name: string;
  attribute: Attribute;
  request: unknown;
  /** The cell meaning the same; null when a file cannot carry it (`because` says why). */
  cell: string | null;
  /** Both paths, or each path with the rule that makes them differ. */
  want: Got | { request: Got; cell: Got; because: string };
}

const x = (n: number) => 'x'.repeat(n);
const ROWS: Row[] = [];
/** A row whose request value and cell mean the same and must give the same result. */
function same(attribute: Attribute, name: string, request: unknown, cell: string, want: Got) {
  ROWS.push({ name: `${attribute}: ${name}`, attribute, request, cell, want });
}
/** A row where ValueSource makes the request and the cell differ on purpose. */
function differs(attribute: Attribute, name: string, request: unknown, cell: string, want: Row['want']) {
  ROWS.push({ name: `${attribute}: ${name}`, attribute, request, cell, want });
}
/** A request value no cell can hold. */
function requestOnly(attribute: Attribute, name: string, request: unknown, want: Got, because: string) {
  ROWS.push({ name: `${attribute}: ${name} (${because})`, attribute, request, cell: null, want });
}

// string
same('name', 'plain text', 'Ann', 'Ann', stored('Ann'));
same('name', 'quotes, backslash, comma', 'say "hi", \\o/', 'say "hi", \\o/', stored('say "hi", \\o/'));
same('name', 'tab and newline inside', 'a\tb\nc', 'a\tb\nc', stored('a\tb\nc'));
same('name', 'a control character inside', 'a\u0001b', 'a\u0001b', stored('a\u0001b'));
same('name', 'non-ASCII', 'é ü 中文 😀', 'é ü 中文 😀', stored('é ü 中文 😀'));
same('name', '; and \\; are plain text, not a list', 'a;b\\;c', 'a;b\\;c', stored('a;b\\;c'));
same('name', 'a JSON number is its text', 42, '42', stored('42'));
same('name', 'a JSON decimal is its text', 1.5, '1.5', stored('1.5'));
same('name', 'a JSON boolean is its text', true, 'true', stored('true'));
same('name', 'empty is not sent', '', '', NOT_SENT);
same('name', '255 characters', x(255), x(255), stored(x(255)));
same('name', '256 characters', x(256), x(256), REFUSED);
same(
  'name',
  '255 emoji (510 UTF-16 units: characters are code points)',
  '😀'.repeat(255),
  '😀'.repeat(255),
  stored('😀'.repeat(255)),
);
same('name', '256 emoji', '😀'.repeat(256), '😀'.repeat(256), REFUSED);
same('name', 'NUL', 'a\0b', 'a\0b', REFUSED);
requestOnly('name', 'an unpaired surrogate', 'a\ud83db', REFUSED, 'a file is UTF-8: see the test below');
same('name', 'surrounding spaces are trimmed in both', ' Ann ', ' Ann ', stored('Ann'));
same('name', 'surrounding tab, newline, no-break space', '\t Ann\u00a0\n', '\t Ann\u00a0\n', stored('Ann'));
same('name', 'a BOM and CRLF around it, a line break inside', '\ufeffa\r\nb\r\n', '\ufeffa\r\nb\r\n', stored('a\r\nb'));
same('name', 'only spaces', '   ', '   ', NOT_SENT);
same('name', '255 characters between two spaces', ` ${x(255)} `, ` ${x(255)} `, stored(x(255)));

// email
same('work', 'an address', 'w@x.io', 'w@x.io', stored('w@x.io'));
same('work', 'surrounding spaces are trimmed in both', ' w@x.io ', ' w@x.io ', stored('w@x.io'));
same('work', 'case is kept', 'W@X.IO', 'W@X.IO', stored('W@X.IO'));
same('work', 'empty', '', '', NOT_SENT);
same('work', 'only spaces', '   ', '   ', NOT_SENT);
same('work', 'not an address', 'not-an-address', 'not-an-address', REFUSED);
same('work', 'no dotted domain', 'w@x', 'w@x', REFUSED);
same('work', 'non-ASCII local part', 'é@x.io', 'é@x.io', REFUSED);
same('work', 'NUL', 'w@x.io\0', 'w@x.io\0', REFUSED);
same('work', '256 characters', `${x(250)}@x.io`, `${x(250)}@x.io`, REFUSED);
same('work', 'a JSON number is not an address', 42, '42', REFUSED);

// number
same('score', 'a JSON number', 42, '42', stored(42));
same('score', 'its text', '42', '42', stored(42));
same('score', 'surrounding spaces', ' 42 ', ' 42 ', stored(42));
same('score', 'surrounding no-break and ideographic spaces', '\u00a042\u3000', '\u00a042\u3000', stored(42));
same('score', 'exponent', '1e3', '1e3', stored(1000));
same('score', 'negative exponent, capital E', '2E-2', '2E-2', stored(0.02));
same('score', 'plus sign', '+3', '+3', stored(3));
same('score', 'no integer part', '.5', '.5', stored(0.5));
same('score', 'no fraction digits', '4.', '4.', stored(4));
same('score', 'negative decimal', '-2.5', '-2.5', stored(-2.5));
same('score', 'leading zeros', '007', '007', stored(7));
same('score', 'a trailing zero', '1.50', '1.50', stored(1.5));
same('score', 'a JSON decimal', 1.5, '1.50', stored(1.5));
same('score', 'negative zero', '-0', '-0', stored(0));
same('score', 'past 2^53, rounded alike', '9007199254740993', '9007199254740993', stored(9007199254740992));
same('score', '255 digits', `${'0'.repeat(254)}1`, `${'0'.repeat(254)}1`, stored(1));
same('score', 'hexadecimal', '0x10', '0x10', REFUSED);
same('score', 'decimal comma', '1,5', '1,5', REFUSED);
same('score', 'two numbers', '1 2', '1 2', REFUSED);
same('score', 'Infinity', 'Infinity', 'Infinity', REFUSED);
same('score', 'out of range', '1e999', '1e999', REFUSED);
same('score', 'NaN', 'NaN', 'NaN', REFUSED);
same('score', 'a sign alone', '-', '-', REFUSED);
same('score', 'a boolean', true, 'true', REFUSED);
same('score', 'NUL', '4\0', '4\0', REFUSED);
same('score', 'empty', '', '', NOT_SENT);
same('score', 'only spaces', '   ', '   ', NOT_SENT);
differs('score', '256 digits', `${'0'.repeat(255)}1`, `${'0'.repeat(255)}1`, {
  request: stored(1),
  cell: REFUSED,
  because: CELL_LIMIT,
});

// boolean
same('vip', 'JSON true', true, 'true', stored(true));
same('vip', 'JSON false', false, 'false', stored(false));
same('vip', 'TRUE', 'TRUE', 'TRUE', stored(true));
same('vip', 'Yes', 'Yes', 'Yes', stored(true));
same('vip', 'yEs', 'yEs', 'yEs', stored(true));
same('vip', 'NO', 'NO', 'NO', stored(false));
same('vip', 'False', 'False', 'False', stored(false));
same('vip', '1 as text', '1', '1', stored(true));
same('vip', '0 as text', '0', '0', stored(false));
same('vip', 'surrounding spaces', ' yes ', ' yes ', stored(true));
same('vip', 'surrounding tab and newline', '\tno\n', '\tno\n', stored(false));
// ValueSource: a cell is trimmed as a whole, then at most 255 characters.
same(
  'vip',
  '300 spaces before it (the limit counts the trimmed text)',
  `${' '.repeat(300)}no`,
  `${' '.repeat(300)}no`,
  stored(false),
);
same('vip', 'y', 'y', 'y', REFUSED);
same('vip', 'on', 'on', 'on', REFUSED);
same('vip', '2', '2', '2', REFUSED);
same('vip', 'truee', 'truee', 'truee', REFUSED);
same('vip', '__proto__', '__proto__', '__proto__', REFUSED);
same('vip', 'NUL', 'yes\0', 'yes\0', REFUSED);
same('vip', 'empty', '', '', NOT_SENT);
same('vip', 'only spaces', '   ', '   ', NOT_SENT);
requestOnly('vip', 'JSON 1', 1, REFUSED, "a cell is text: the cell '1' is the request's '1'");
requestOnly('vip', 'null', null, NOT_SENT, 'a cell has no null: its empty cell is the request\'s ""');

// array
same('tags', 'a JSON array', ['a', 'b'], 'a;b', stored(['a', 'b']));
same('tags', 'list text', 'a; b', 'a; b', stored(['a', 'b']));
same('tags', 'entries trimmed', [' a ', 'b '], ' a ; b ', stored(['a', 'b']));
same('tags', 'one entry', 'a', 'a', stored(['a']));
same('tags', '\\; is a literal semicolon', 'b\\;c', 'b\\;c', stored(['b;c']));
same('tags', "a JSON entry's ; is literal", ['b;c'], 'b\\;c', stored(['b;c']));
same('tags', 'other backslashes are kept', 'd\\x;e\\', 'd\\x;e\\', stored(['d\\x', 'e\\']));
same('tags', 'empty entries dropped', 'a;;b;', 'a;;b;', stored(['a', 'b']));
same('tags', 'repeats kept', 'a;a', 'a;a', stored(['a', 'a']));
same('tags', 'JSON numbers and booleans as entries', [1, true], '1;true', stored(['1', 'true']));
same('tags', 'separators only', ';;', ';;', NOT_SENT);
same('tags', 'an empty JSON array', [], '', NOT_SENT);
same('tags', 'blank entries only', ['', ' '], ' ; ', NOT_SENT);
same('tags', 'an entry of 255 characters', [x(255)], x(255), stored([x(255)]));
same('tags', 'an entry of 256 characters', [x(256)], x(256), REFUSED);
same('tags', 'an entry of 256 characters in list text', `a;${x(256)}`, `a;${x(256)}`, REFUSED);
same('tags', 'NUL in an entry', ['a', 'b\0'], 'a;b\0', REFUSED);
requestOnly('tags', 'an unpaired surrogate in an entry', ['a\udc00'], REFUSED, 'a file is UTF-8');
requestOnly('tags', 'a null entry', [null], REFUSED, 'a cell has no null');
differs('tags', 'short entries, 301 characters in all', [x(200), 'y'.repeat(100)], `${x(200)};${'y'.repeat(100)}`, {
  request: stored([x(200), 'y'.repeat(100)]),
  cell: REFUSED,
  because: CELL_LIMIT,
});
differs(
  'tags',
  'short entries, 301 characters of list text',
  `${x(200)};${'y'.repeat(100)}`,
  `${x(200)};${'y'.repeat(100)}`,
  {
    request: stored([x(200), 'y'.repeat(100)]),
    cell: REFUSED,
    because: CELL_LIMIT,
  },
);

const wantOf = (row: Row, path: 'request' | 'cell'): Got =>
  typeof row.want === 'object' && 'because' in row.want ? row.want[path] : row.want;
const emailOf = (n: number, path: 'api' | 'file') => `value${n}.${path}@parity.test`;

describe('one table of values through POST /v1/contacts and a contact import', () => {
  test('the table: every type, the named difference, request-only values', () => {
    expect(ROWS.length).toBe(103);
    expect(new Set(ROWS.map((r) => r.name)).size).toBe(ROWS.length);
    const types = new Set(ROWS.map((r) => ATTRIBUTES[r.attribute]));
    expect([...types].sort()).toEqual(['array', 'boolean', 'email', 'number', 'string']);
    const because = ROWS.flatMap((r) => (typeof r.want === 'object' && 'because' in r.want ? [r.want.because] : []));
    expect(new Set(because)).toEqual(new Set([CELL_LIMIT]));
  });

  test('each value is stored alike, or refused alike, but where the row names the rule', async () => {
    const { t } = bed;
    for (const [name, type] of Object.entries(ATTRIBUTES)) await createAttribute(t.db.sql, t.accountId, name, type);

    const api = new Map<number, Got | string>();
    for (const [n, row] of ROWS.entries()) {
      const res = await t.call('POST', '/v1/contacts', {
        body: { email: emailOf(n, 'api'), attributes: { [row.attribute]: row.request } },
      });
      const pointer = res.body?.errors?.[0]?.pointer;
      if (res.status === 400 && pointer === `/attributes/${row.attribute}`) api.set(n, REFUSED);
      else if (res.status !== 201) api.set(n, `HTTP ${res.status} ${JSON.stringify(res.body)}`);
    }

    const inFile = [...ROWS.entries()].filter(([, row]) => row.cell !== null);
    const lines = [COLUMNS.join(',')];
    for (const [n, row] of inFile) {
      lines.push(
        csvLine(COLUMNS.map((c) => (c === 'Email' ? emailOf(n, 'file') : c === row.attribute ? row.cell! : ''))),
      );
    }
    const result = await importThrough(
      bed,
      { columns: COLUMNS, duplicateContactStrategy: 'overwrite' },
      lines.join('\n'),
      10_000,
    );

    const emails = ROWS.flatMap((_, n) => [emailOf(n, 'api'), emailOf(n, 'file')]);
    const contacts = await storedContacts(bed, emails);
    const gotOf = (n: number, row: Row, path: 'api' | 'file'): Got => {
      const contact = contacts.get(emailOf(n, path));
      if (!contact) return REFUSED; // the API answered 400, or the import counted the row malformed
      return Object.hasOwn(contact.attributes, row.attribute) ? stored(contact.attributes[row.attribute]) : NOT_SENT;
    };
    const differences: object[] = [];
    for (const [n, row] of ROWS.entries()) {
      const got = {
        request: api.get(n) ?? gotOf(n, row, 'api'),
        cell: row.cell === null ? undefined : gotOf(n, row, 'file'),
      };
      const want = { request: wantOf(row, 'request'), cell: row.cell === null ? undefined : wantOf(row, 'cell') };
      if (!Bun.deepEquals(got, want, true)) differences.push({ row: row.name, got, want });
    }
    expect(differences).toEqual([]);
    const refusedCells = inFile.filter(([, row]) => wantOf(row, 'cell') === REFUSED).length;
    expect(result).toMatchObject({
      rowCount: inFile.length - refusedCells,
      malformedCount: refusedCells,
      addedCount: inFile.length - refusedCells,
    });
  });

  test('a cell cannot carry an unpaired surrogate: its UTF-8 form is invalid and fails the whole file', async () => {
    const header = new TextEncoder().encode(`${COLUMNS.join(',')}\nsurrogate@parity.test,a`);
    // U+D83D written as UTF-8 would write it (ED A0 BD): no valid UTF-8 decoder reads these bytes.
    const file = new Uint8Array([...header, 0xed, 0xa0, 0xbd, ...new TextEncoder().encode('b,,,,\n')]);
    const result = await importThrough(
      bed,
      { columns: COLUMNS, duplicateContactStrategy: 'overwrite' },
      file,
      10_000,
      true,
    );
    expect(result.failureReason).toBe('The file is not UTF-8 text.');
  });
});

/**
 * The deterministic row model behind the benchmark CSV: every cell of row i (and what the service
 * must store for it) is a pure function of (i, variant), so the generator streams any number of rows
 * without memory and the verifier recomputes the expected contact of any row without the file.
 * Variant 0 is import A's file; variant 1 (import B) keeps every email and row kind but changes
 * every attribute value, so each row of B is an update.
 *
 * This is the wide shape (Email, Brand and 11 attributes, ~187 bytes a row); narrow.ts is the
 * narrow one (6 columns, ~75 bytes) and shapes.ts sets the two side by side. The types, the hash
 * and the helpers over a shape's duplicates (lastRowOf, sampleNormalOf) serve both.
 */
import { createHash } from 'node:crypto';

export const ATTRIBUTES = [
  { name: 'first_name', type: 'string' },
  { name: 'last_name', type: 'string' },
  { name: 'company', type: 'string' },
  { name: 'city', type: 'string' },
  { name: 'alt_email', type: 'email' },
  { name: 'age', type: 'number' },
  { name: 'score', type: 'number' },
  { name: 'vip', type: 'boolean' },
  { name: 'opted_in', type: 'boolean' },
  { name: 'tags', type: 'array' },
  { name: 'interests', type: 'array' },
] as const;
export const COLUMNS = ['Email', 'Brand', ...ATTRIBUTES.map((a) => a.name)];
export const BRANDS = Array.from({ length: 8 }, (_, b) => `Brand ${b}`);

export type Value = string | number | boolean | string[];
export type Kind = 'normal' | 'duplicate' | 'malformed';
export interface Row {
  kind: Kind;
  /** CSV cells in COLUMNS order, already quoted where needed */
  cells: string[];
  /** the identity email as written, for normal and duplicate rows */
  email: string;
  /** brand indexes into BRANDS */
  brands: number[];
  /** what the stored contact holds for this row (absent key = not sent) */
  attributes: Record<string, Value>;
}

export const FIRST = [
  'Ada',
  'Alan',
  'Grace',
  'Linus',
  'Barbara',
  'Ken',
  'Margaret',
  'Dennis',
  'Frances',
  'Edsger',
  'Radia',
  'Donald',
  'Shafi',
  'Tim',
  'Hedy',
  'John',
];
const LAST = [
  'Lovelace',
  'Turing',
  'Hopper',
  'Torvalds',
  'Liskov',
  'Thompson',
  'Hamilton',
  'Ritchie',
  'Allen',
  'Dijkstra',
  'Perlman',
  'Knuth',
  'Goldwasser',
  'Berners-Lee',
  'Lamarr',
  'McCarthy',
];
const COMPANY = [
  'Acme Logistics Ltd',
  'Globex Corporation',
  'Initech Software',
  'Umbrella Pharma',
  'Stark Industries',
  'Wayne Enterprises',
  'Hooli Cloud Services',
  'Vandelay Import Export',
];
// Cells with a comma or a quote exercise CSV quoting on both loaders.
const CITY = ['Amsterdam', 'Berlin', '"Paris, FR"', 'Lisbon', 'Oslo', '"Portland ""Rose City"""', 'Kyoto', 'Nairobi'];
const CITY_VALUE = ['Amsterdam', 'Berlin', 'Paris, FR', 'Lisbon', 'Oslo', 'Portland "Rose City"', 'Kyoto', 'Nairobi'];
const TAGS = ['newsletter', 'promo', 'vip-club', 'weekly', 'beta', 'events', 'partner', 'webinar'];
const BOOL_TEXT: [string, boolean][] = [
  ['true', true],
  ['false', false],
  ['yes', true],
  ['no', false],
  ['1', true],
  ['0', false],
  ['TRUE', true],
  ['No', false],
];

/** A 32-bit integer hash of (i, salt): cheap, stateless, well mixed. */
export function hash(i: number, salt: number): number {
  let x = Math.imul(i, 0x9e3779b1) ^ Math.imul(salt + 0x632be5ab, 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** 0.5% malformed, 1% duplicates of an earlier normal row (none in the first 1000 rows). */
function baseKind(i: number): Kind {
  const r = hash(i, 1) % 10_000;
  if (r < 50) return 'malformed';
  if (r < 150 && i >= 1000) return 'duplicate';
  return 'normal';
}
export const kindOf = baseKind;

/** The normal row whose email duplicate row i repeats. */
export function dupTarget(i: number): number {
  let t = i - 1 - (hash(i, 2) % 1000);
  while (t > 0 && baseKind(t) !== 'normal') t--;
  return t;
}

export function normalEmail(i: number): string {
  const local = `${FIRST[hash(i, 3) % 16]}.${LAST[hash(i, 4) % 16]}.${i.toString(36)}`;
  return `${local}@mailbox${hash(i, 5) % 50}.benchmark-example.com`.toLowerCase();
}

export const md5Hex = (email: string) => createHash('md5').update(email.trim().toLowerCase()).digest('hex');

/** An md5 in hex as the contacts' `email_md5` column holds it: a uuid. */
export const md5Uuid = (md5: string) => md5.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');

function pick<T>(list: readonly T[], i: number, salt: number, variant: number): T {
  return list[(hash(i, salt) + variant * 3) % list.length]!;
}

/** `min` to 2 entries; variant 1 capitalises each entry, which changes the value but not the file size. */
function arrayOf(i: number, salt: number, min: number, variant: number): string[] {
  const n = Math.max(min, hash(i, salt) % 3);
  const out: string[] = [];
  for (let k = 0; k < n; k++) {
    const tag = `${TAGS[(hash(i, salt + k + 1) + k) % TAGS.length]}${k}`;
    out.push(variant ? tag[0]!.toUpperCase() + tag.slice(1) : tag);
  }
  return out;
}

/** Attribute cells and values of a good row. Variant 1 never leaves a cell empty and changes every value. */
function attributesOf(i: number, variant: number): { cells: string[]; values: Record<string, Value> } {
  const v = variant;
  const first = pick(FIRST, i, 10, v);
  const last = pick(LAST, i, 11, v);
  const company = pick(COMPANY, i, 12, v);
  const cityIdx = (hash(i, 13) + v * 3) % CITY.length;
  const altEmpty = !v && hash(i, 14) % 10 === 0;
  const altDomain = `${v ? 'secondary' : 'alternate'}${hash(i, 16) % 13}.benchmark-example.org`;
  const alt = `${first}.${last}${hash(i, 15) % 1000}@${altDomain}`.toLowerCase();
  const age = 18 + (hash(i, 17) % 70) + v;
  const score = (hash(i, 18) % 100_000) / 100 + v * 1.5;
  const [vipText, vipA] = BOOL_TEXT[hash(i, 19) % BOOL_TEXT.length]!;
  const optEmpty = !v && hash(i, 20) % 7 === 0;
  const [optText, optA] = BOOL_TEXT[hash(i, 21) % BOOL_TEXT.length]!;
  const tags = arrayOf(i, 22, 1, v);
  const interests = arrayOf(i, 30, v, v); // A may leave it empty (not sent); B always sends it
  const values: Record<string, Value> = { first_name: first, last_name: last, company, city: CITY_VALUE[cityIdx]! };
  if (!altEmpty) values.alt_email = alt;
  values.age = age;
  values.score = Number(score.toFixed(2));
  values.vip = v ? !vipA : vipA;
  if (!optEmpty) values.opted_in = v ? !optA : optA;
  values.tags = tags;
  if (interests.length) values.interests = interests;
  const cells = [
    first,
    last,
    company,
    CITY[cityIdx]!,
    altEmpty ? '' : alt,
    String(age),
    score.toFixed(2),
    v ? String(!vipA) : vipText,
    optEmpty ? '' : v ? (optA ? 'no' : 'yes') : optText,
    tags.join(';'),
    interests.join(';'),
  ];
  return { cells, values };
}

/** One or two brands (10% none in A); names sometimes in another case, which must still match. */
function brandsOf(i: number, variant: number): { cell: string; brands: number[] } {
  if (!variant && hash(i, 40) % 10 === 0) return { cell: '', brands: [] };
  const a = (hash(i, 41) + variant * 3) % BRANDS.length;
  const brands = hash(i, 42) % 3 === 0 ? [a, (a + 1 + (hash(i, 43) % 7)) % BRANDS.length] : [a];
  const names = brands.map((b, k) => (hash(i, 44 + k) % 4 === 0 ? BRANDS[b]!.toLowerCase() : BRANDS[b]!));
  return { cell: names.join(';'), brands };
}

const LONG = 'x'.repeat(300);

export function rowAt(i: number, variant: number): Row {
  const kind = baseKind(i);
  const { cells: attrCells, values } = attributesOf(i, variant);
  const { cell: brandCell, brands } = brandsOf(i, variant);
  if (kind === 'malformed') {
    const bad = `bad.${i.toString(36)}@malformed.example.com`;
    const cells = [bad, brandCell, ...attrCells];
    switch (hash(i, 50) % 6) {
      case 0:
        cells[0] = `not-an-email-${i}.example.com`;
        break;
      case 1:
        cells[0] = '';
        break;
      case 2:
        cells[2] = LONG;
        break; // first_name over 255 characters
      case 3:
        cells[7] = 'forty-two';
        break; // age is not a number
      case 4:
        cells[9] = 'maybe';
        break; // vip is not a boolean
      default:
        cells[1] = `No Such Brand ${i % 7}`; // matches no brand
    }
    return { kind, cells, email: '', brands: [], attributes: {} };
  }
  let email = normalEmail(kind === 'duplicate' ? dupTarget(i) : i);
  if (kind === 'duplicate') {
    // Repeats differ as written but not after trim + lowercase.
    const style = hash(i, 51) % 3;
    if (style === 1) email = email.toUpperCase();
    else if (style === 2) email = `  ${email} `;
  }
  return { kind, cells: [email, brandCell, ...attrCells], email, brands, attributes: values };
}

/** How a shape places its duplicates: what lastRowOf and sampleNormalOf need of a row model. */
export interface RowKinds {
  kindOf(i: number): Kind;
  /** the normal row whose email duplicate row i repeats */
  dupTarget(i: number): number;
  /** a duplicate's target lies at most this many rows before it, non-normal rows skipped besides */
  reach: number;
}

/** The last row of the file carrying normal row j's email: j itself or its last duplicate. */
export function lastRowOf(model: RowKinds, j: number, rows: number): number {
  let last = j;
  for (let i = j + 1; i < Math.min(rows, j + model.reach + 200); i++)
    if (model.kindOf(i) === 'duplicate' && model.dupTarget(i) === j) last = i;
  return last;
}

/** `count` normal rows spread evenly over the file (deterministic), for read-back checks and HTTP load. */
export function sampleNormalOf(model: RowKinds, rows: number, count: number, salt = 0): number[] {
  const out: number[] = [];
  for (let k = 0; k < count && k < rows; k++) {
    let i = Math.floor(((k + (hash(k, 60 + salt) % 1000) / 1000) * rows) / count);
    while (i < rows && model.kindOf(i) !== 'normal') i++;
    if (i < rows) out.push(i);
  }
  return [...new Set(out)];
}

/** The wide shape's duplicates: 1 % of rows, up to 1000 rows after their target. */
export const WIDE_KINDS: RowKinds = { kindOf: baseKind, dupTarget, reach: 1000 };
export const lastRowFor = (j: number, rows: number) => lastRowOf(WIDE_KINDS, j, rows);
export const sampleNormalRows = (rows: number, count: number, salt = 0) =>
  sampleNormalOf(WIDE_KINDS, rows, count, salt);

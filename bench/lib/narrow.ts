/**
 * The narrow shape's row model (issue: "a second file shape in the bench"): 6 columns, `Email` and
 * one attribute of each type, about 75 bytes a row, beside the wide shape of dataset.ts. Like the
 * wide one, every cell of row i is a pure function of (i, variant): variant 0 is file A, variant 1
 * (file B) keeps every email and row kind and changes every attribute value, so each row is an update.
 *
 * The mix, as the file has it: about 1 address in 8 spelled with capitals; every 200th row
 * repeats an earlier address in upper case (a case-variant duplicate: the same contact once
 * trimmed and lowercased); some cells empty; booleans in every spelling the import accepts
 * (true/false/yes/no/1/0 in any case: src/schema/values.ts readBoolean). Besides, 0.5 % of rows are
 * malformed by content, as in file A, so the rejected counts are exercised: no `@`, an empty email,
 * a string over 255 characters, a non-number, a non-boolean, an attribute email that is no address.
 * No Brand column: the file has none, and the wide shape covers brands.
 */
import { FIRST, hash, type Kind, type Row, type Value } from './dataset';

export const NARROW_ATTRIBUTES = [
  { name: 'nickname', type: 'string' },
  { name: 'backup_email', type: 'email' },
  { name: 'visits', type: 'number' },
  { name: 'active', type: 'boolean' },
  { name: 'labels', type: 'array' },
] as const;
export const NARROW_COLUMNS = ['Email', ...NARROW_ATTRIBUTES.map((a) => a.name)];

/** Every 200th row (199, 399, …) repeats an earlier address in upper case. */
const DUPLICATE_EVERY = 200;
/** How far back a duplicate's address lies at most (lastRowFor scans this far ahead, and a little more). */
export const NARROW_DUPLICATE_REACH = 1000;

/** Each accepted word in lower, upper and title case: the import reads them all. */
const BOOL_TEXT: [string, boolean][] = [
  ['true', true],
  ['TRUE', true],
  ['True', true],
  ['yes', true],
  ['YES', true],
  ['Yes', true],
  ['1', true],
  ['false', false],
  ['FALSE', false],
  ['False', false],
  ['no', false],
  ['NO', false],
  ['No', false],
  ['0', false],
];
const TRUE_TEXT = BOOL_TEXT.filter(([, b]) => b).map(([t]) => t);
const FALSE_TEXT = BOOL_TEXT.filter(([, b]) => !b).map(([t]) => t);
const LABELS = ['news', 'promo', 'vip', 'beta', 'event', 'sale'];

/** 0.5 % malformed (rows 199, 399, … excepted: they are the duplicates). */
export function narrowKind(i: number): Kind {
  if (i % DUPLICATE_EVERY === DUPLICATE_EVERY - 1) return 'duplicate';
  return hash(i, 101) % 1000 < 5 ? 'malformed' : 'normal';
}

/** The normal row whose address duplicate row i repeats: up to NARROW_DUPLICATE_REACH rows back. */
export function narrowDupTarget(i: number): number {
  let t = Math.max(0, i - 1 - (hash(i, 102) % NARROW_DUPLICATE_REACH));
  while (t > 0 && narrowKind(t) !== 'normal') t--;
  return t;
}

const title = (s: string) => s[0]!.toUpperCase() + s.slice(1);

/** Row i's own address, short (the whole row is ~75 bytes); 1 in 8 spelled with capitals. */
export function narrowEmail(i: number): string {
  const first = FIRST[hash(i, 103) % FIRST.length]!.toLowerCase();
  const domain = `mailbox${hash(i, 104) % 20}.example.net`;
  if (hash(i, 105) % 8 === 0) return `${title(first)}.${i.toString(36).toUpperCase()}@${title(domain)}`;
  return `${first}.${i.toString(36)}@${domain}`;
}

/** 0 to 2 labels in A (none: the cell is empty, not sent); 1 or 2 in B, capitalised, so always another value. */
function labelsOf(i: number, variant: number): string[] {
  const n = Math.max(variant, hash(i, 110) % 3);
  const out: string[] = [];
  for (let k = 0; k < n; k++) {
    const label = LABELS[(hash(i, 111 + k) + k) % LABELS.length]!;
    out.push(variant ? title(label) : label);
  }
  return [...new Set(out)];
}

/** Attribute cells and values of a good row. Variant 1 never leaves a cell empty and changes every value. */
function attributesOf(i: number, variant: number): { cells: string[]; values: Record<string, Value> } {
  const v = variant;
  const nickEmpty = !v && hash(i, 120) % 10 === 0;
  const nickname = FIRST[(hash(i, 121) + v * 3) % FIRST.length]!;
  const backupEmpty = !v && hash(i, 122) % 8 === 0;
  const backup = `${nickname.toLowerCase()}${hash(i, 123) % 100}@${v ? 'bak' : 'alt'}${hash(i, 124) % 7}.example.org`;
  // Integers and halves, canonical as written (the import stores the number, not the text).
  const base = hash(i, 125) % 1000;
  const visits = hash(i, 126) % 4 === 0 ? base + 0.5 : base;
  const activeEmpty = !v && hash(i, 127) % 6 === 0;
  const [activeText, activeA] = BOOL_TEXT[hash(i, 128) % BOOL_TEXT.length]!;
  const flipped = activeA ? FALSE_TEXT : TRUE_TEXT; // B's value is A's negation, in any spelling
  const labels = labelsOf(i, v);
  const values: Record<string, Value> = {};
  if (!nickEmpty) values.nickname = nickname;
  if (!backupEmpty) values.backup_email = backup;
  values.visits = visits + v;
  if (!activeEmpty) values.active = v ? !activeA : activeA;
  if (labels.length) values.labels = labels;
  const cells = [
    nickEmpty ? '' : nickname,
    backupEmpty ? '' : backup,
    String(visits + v),
    activeEmpty ? '' : v ? flipped[hash(i, 129) % flipped.length]! : activeText,
    labels.join(';'),
  ];
  return { cells, values };
}

const LONG = 'x'.repeat(300);

export function narrowRowAt(i: number, variant: number): Row {
  const kind = narrowKind(i);
  const { cells: attrCells, values } = attributesOf(i, variant);
  if (kind === 'malformed') {
    const cells = [`bad.${i.toString(36)}@malformed.example.com`, ...attrCells];
    switch (hash(i, 130) % 6) {
      case 0:
        cells[0] = `not-an-email-${i}.example.com`;
        break;
      case 1:
        cells[0] = '';
        break;
      case 2:
        cells[1] = LONG; // nickname over 255 characters
        break;
      case 3:
        cells[3] = 'forty-two'; // visits is not a number
        break;
      case 4:
        cells[4] = 'maybe'; // active is not a boolean
        break;
      default:
        cells[2] = `no-at-sign.${i % 7}.example.org`; // backup_email is not an address
    }
    return { kind, cells, email: '', brands: [], attributes: {} };
  }
  // The duplicate: the earlier row's address in upper case, the same contact once lowercased.
  const email = kind === 'duplicate' ? narrowEmail(narrowDupTarget(i)).toUpperCase() : narrowEmail(i);
  return { kind, cells: [email, ...attrCells], email, brands: [], attributes: values };
}

import type { AttributeType } from '../../src/schema/service';

/**
 * One CSV data row → one line of COPY text for the staging table, or undefined when the row is
 * malformed. This runs once per row of files up to 25 million rows, so it avoids what it can:
 * no regex per cell, no object per cell, attributes JSON built as text, md5 through Bun's native
 * one-shot hash.
 *
 * Cell rules (DESIGN.md "CSV cells", the spec's column rules):
 * - cells are trimmed; an empty cell is "not sent";
 * - a cell over 255 characters (code points, as PostgreSQL counts them) makes the row malformed;
 * - string: as is; email: a valid address; number: a decimal number; boolean: true/false/yes/no/1/0
 *   in any case; array and Brand: split on `;`, `\;` a literal semicolon, entries trimmed, empty
 *   entries dropped, each at most 255 characters;
 * - Brand entries are names (case-insensitive) or ids of the account's live brands; one that
 *   matches none makes the row malformed; repeats count once; the import's own brands are added.
 * - a NUL character cannot be stored by PostgreSQL: the row is malformed.
 */

export const MAX_CELL = 255;

const IDENTITY = 0;
const STRING = 1;
const EMAIL = 2;
const NUMBER = 3;
const BOOLEAN = 4;
const ARRAY = 5;
const BRAND = 6;
const KIND: Record<AttributeType, number> = { string: STRING, email: EMAIL, number: NUMBER, boolean: BOOLEAN, array: ARRAY };

/** A file column: its canonical schema name and type; `Email` and `Brand` are the predefined ones. */
export interface Column {
  name: string;
  type: AttributeType | 'identity' | 'brand';
}

/** Live brands of the account by lowercased name and by id. */
export class BrandIndex {
  private readonly byKey = new Map<string, string>();

  constructor(brands: readonly { id: string; name: string }[]) {
    // Ids first, names second: a brand named like another brand's id resolves to the named one.
    for (const b of brands) this.byKey.set(b.id.toLowerCase(), b.id);
    for (const b of brands) this.byKey.set(b.name.toLowerCase(), b.id);
  }

  resolve(value: string): string | undefined {
    return this.byKey.get(value.toLowerCase());
  }
}

/** Characters as the spec counts them: code points (a surrogate pair is one). */
export function tooLong(s: string): boolean {
  if (s.length <= MAX_CELL) return false;
  if (s.length > 2 * MAX_CELL) return true;
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0xdc00 || c > 0xdfff) n++; // count everything but the trailing half of a pair
  }
  return n > MAX_CELL;
}

/**
 * Splits a list cell: `;` separates, `\;` is a literal semicolon (any other backslash is kept).
 * Entries are trimmed and empty ones dropped. Undefined when an entry is over 255 characters.
 */
export function splitList(cell: string): string[] | undefined {
  if (cell.indexOf(';') === -1) return tooLong(cell) ? undefined : [cell];
  const out: string[] = [];
  let current = '';
  let from = 0;
  for (let i = 0; i < cell.length; i++) {
    const c = cell.charCodeAt(i);
    if (c === 0x5c /* \ */ && cell.charCodeAt(i + 1) === 0x3b /* ; */) {
      current += cell.slice(from, i) + ';';
      from = ++i + 1;
    } else if (c === 0x3b) {
      const entry = (current + cell.slice(from, i)).trim();
      if (entry.length > 0) out.push(entry);
      current = '';
      from = i + 1;
    }
  }
  const last = (current + cell.slice(from)).trim();
  if (last.length > 0) out.push(last);
  for (const e of out) if (tooLong(e)) return undefined;
  return out;
}

/** The JSON text of a decimal number cell (`-1`, `+2.5`, `.5`, `3.`, `1e3`), or undefined. */
export function readNumber(cell: string): string | undefined {
  let i = cell.charCodeAt(0) === 0x2b || cell.charCodeAt(0) === 0x2d ? 1 : 0;
  let digits = 0;
  while (i < cell.length && isDigit(cell.charCodeAt(i))) i++, digits++;
  if (cell.charCodeAt(i) === 0x2e /* . */) {
    i++;
    while (i < cell.length && isDigit(cell.charCodeAt(i))) i++, digits++;
  }
  if (digits === 0) return undefined;
  if ((cell.charCodeAt(i) | 0x20) === 0x65 /* e or E */) {
    i++;
    if (cell.charCodeAt(i) === 0x2b || cell.charCodeAt(i) === 0x2d) i++;
    const start = i;
    while (i < cell.length && isDigit(cell.charCodeAt(i))) i++;
    if (i === start) return undefined;
  }
  if (i !== cell.length) return undefined;
  const n = Number(cell);
  return Number.isFinite(n) ? String(n) : undefined;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

// Characters allowed in the local part by the HTML living standard's rule (src/contacts/email.ts).
const LOCAL_CHAR = new Uint8Array(128);
for (const c of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.!#$%&'*+/=?^_`{|}~-") LOCAL_CHAR[c.charCodeAt(0)] = 1;

function isAlnum(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39);
}

/**
 * Exactly `isValidEmail` of src/contacts/email.ts (the service's one email rule), as a single
 * character scan: the regex version costs about half of the per-row budget at 25 million rows.
 * test/import-pipeline-cells.test.ts checks that both agree.
 */
export function validEmail(s: string): boolean {
  const n = s.length;
  if (n === 0 || n > 254) return false;
  let at = -1;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x40) {
      if (at !== -1) return false;
      at = i;
    } else if (at === -1 && (c >= 128 || LOCAL_CHAR[c] === 0)) return false;
  }
  if (at <= 0 || at > 64) return false;
  let labels = 0;
  let start = at + 1;
  for (let i = start; i <= n; i++) {
    const c = i < n ? s.charCodeAt(i) : 0x2e;
    if (c === 0x2e) {
      const len = i - start;
      if (len === 0 || len > 63 || !isAlnum(s.charCodeAt(start)) || !isAlnum(s.charCodeAt(i - 1))) return false;
      labels++;
      start = i + 1;
    } else if (c !== 0x2d && !isAlnum(c)) return false;
  }
  return labels >= 2;
}

/** `true`/`false`/`yes`/`no`/`1`/`0` in any case, as JSON text; undefined otherwise. */
export function readBoolean(cell: string): string | undefined {
  if (cell.length > 5) return undefined;
  switch (cell.toLowerCase()) {
    case 'true': case 'yes': case '1': return 'true';
    case 'false': case 'no': case '0': return 'false';
    default: return undefined;
  }
}

export class RowReader {
  private readonly kinds: number[];
  /** `"name":` of each column, JSON-encoded once. */
  private readonly keys: string[];

  constructor(
    columns: readonly Column[],
    private readonly brands: BrandIndex,
    private readonly importBrandIds: readonly string[],
  ) {
    this.kinds = columns.map((c) => (c.type === 'identity' ? IDENTITY : c.type === 'brand' ? BRAND : KIND[c.type]));
    this.keys = columns.map((c) => `${JSON.stringify(c.name)}:`);
  }

  /** The staging line `row_no, email_md5, email, attributes, brand_ids` (COPY text), or undefined. */
  line(rowNo: number, cells: readonly string[]): string | undefined {
    const kinds = this.kinds;
    if (cells.length !== kinds.length) return undefined;
    let email: string | undefined;
    let json = '';
    let brandIds: string[] | undefined;
    for (let i = 0; i < kinds.length; i++) {
      let cell = cells[i]!;
      if (cell.length === 0) continue;
      cell = cell.trim();
      if (cell.length === 0) continue;
      if (cell.indexOf('\0') !== -1 || tooLong(cell)) return undefined;
      let value: string | undefined;
      switch (kinds[i]) {
        case IDENTITY:
          if (!validEmail(cell)) return undefined;
          email = cell;
          continue;
        case STRING:
          value = JSON.stringify(cell);
          break;
        case EMAIL:
          if (!validEmail(cell)) return undefined;
          value = JSON.stringify(cell);
          break;
        case NUMBER:
          value = readNumber(cell);
          break;
        case BOOLEAN:
          value = readBoolean(cell);
          break;
        case ARRAY: {
          const list = splitList(cell);
          if (list === undefined) return undefined;
          if (list.length === 0) continue;
          value = JSON.stringify(list);
          break;
        }
        case BRAND: {
          const list = splitList(cell);
          if (list === undefined) return undefined;
          for (const entry of list) {
            const id = this.brands.resolve(entry);
            if (id === undefined) return undefined;
            brandIds ??= [];
            if (!brandIds.includes(id)) brandIds.push(id);
          }
          continue;
        }
      }
      if (value === undefined) return undefined;
      json += json.length === 0 ? this.keys[i]! + value : `,${this.keys[i]!}${value}`;
    }
    if (email === undefined) return undefined;
    for (const id of this.importBrandIds) {
      brandIds ??= [];
      if (!brandIds.includes(id)) brandIds.push(id);
    }
    const md5 = Bun.MD5.hash(email.toLowerCase(), 'hex') as string;
    // COPY text format reads backslash escapes; JSON's own escapes must survive it. JSON has no raw
    // tab or newline, and a valid address has neither backslash nor control characters.
    if (json.indexOf('\\') !== -1) json = json.replaceAll('\\', '\\\\');
    const brands = brandIds === undefined ? '{}' : `{${brandIds.join(',')}}`;
    return `${rowNo}\t${md5}\t${email}\t{${json}}\t${brands}\n`;
  }
}

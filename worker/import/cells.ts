import type { AttributeType } from '../../src/schema/service';
import { jsonString, readBoolean, readNumber, splitList, tooLong, validEmail } from '../../src/schema/values';

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
    // Keys are lowercase, so a hit as written is the hit; only other spellings pay for a copy.
    return this.byKey.get(value) ?? this.byKey.get(value.toLowerCase());
  }
}

export class RowReader {
  private readonly kinds: number[];
  /** `"name":` of each column, JSON-encoded once. */
  private readonly keys: string[];
  /** Column indexes in the order their keys are written (see jsonbKeyOrder). */
  private readonly order: number[];

  constructor(
    columns: readonly Column[],
    private readonly brands: BrandIndex,
    private readonly importBrandIds: readonly string[],
  ) {
    this.kinds = columns.map((c) => (c.type === 'identity' ? IDENTITY : c.type === 'brand' ? BRAND : KIND[c.type]));
    this.keys = columns.map((c) => `${JSON.stringify(c.name)}:`);
    this.order = jsonbKeyOrder(columns);
  }

  /** The staging line `row_no, email_md5, email, attributes, brand_ids, attribute_count` (COPY text), or undefined. */
  line(rowNo: number, cells: readonly string[]): string | undefined {
    const kinds = this.kinds;
    if (cells.length !== kinds.length) return undefined;
    let email: string | undefined;
    let json = '';
    let sent = 0;
    let brandIds: string[] | undefined;
    let backslash = false;
    const order = this.order;
    for (let k = 0; k < order.length; k++) {
      const i = order[k]!;
      let cell = cells[i]!;
      const n = cell.length;
      if (n === 0) continue;
      // trim() only when an end could be whitespace (ASCII space/control, or any non-ASCII
      // character, which trim() may also count as space): most cells are left as they are.
      const first = cell.charCodeAt(0);
      const last = cell.charCodeAt(n - 1);
      if (first <= 0x20 || first >= 0x80 || last <= 0x20 || last >= 0x80) {
        cell = cell.trim();
        if (cell.length === 0) continue;
      }
      if (cell.indexOf('\0') !== -1 || tooLong(cell)) return undefined;
      let value: string | undefined;
      switch (kinds[i]) {
        case IDENTITY:
          if (!validEmail(cell)) return undefined;
          email = cell;
          continue;
        case STRING:
          value = jsonString(cell);
          if (value.length !== cell.length + 2) backslash = true; // escaped: may hold a backslash
          break;
        case EMAIL:
          if (!validEmail(cell)) return undefined;
          value = jsonString(cell); // a valid address needs no escape
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
          if (value.indexOf('\\') !== -1) backslash = true;
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
      sent++;
    }
    if (email === undefined) return undefined;
    for (const id of this.importBrandIds) {
      brandIds ??= [];
      if (!brandIds.includes(id)) brandIds.push(id);
    }
    const md5 = Bun.MD5.hash(email.toLowerCase(), 'hex') as string;
    // COPY text format reads backslash escapes; JSON's own escapes must survive it. JSON has no raw
    // tab or newline, and a valid address has neither backslash nor control characters.
    if (backslash) json = json.replaceAll('\\', '\\\\');
    const brands = brandIds === undefined ? '{}' : brandIds.length === 1 ? `{${brandIds[0]!}}` : `{${brandIds.join(',')}}`;
    return `${rowNo}\t${md5}\t${email}\t{${json}}\t${brands}\t${sent}\n`;
  }
}

/**
 * Column indexes with the attributes in the order jsonb stores object keys: shorter UTF-8 name
 * first, then bytewise. PostgreSQL sorts every object's keys that way when it parses jsonb text,
 * and already-ordered keys make that sort a single pass: the staging COPY, where parsing the
 * attributes into jsonb is most of PostgreSQL's work, took 12-25% less time on the bench file.
 * Which cell is looked at first changes nothing else: every cell of a row is checked either way.
 */
function jsonbKeyOrder(columns: readonly Column[]): number[] {
  const name = columns.map((c) => Buffer.from(c.name, 'utf8'));
  return columns
    .map((_, i) => i)
    .sort((a, b) => name[a]!.length - name[b]!.length || Buffer.compare(name[a]!, name[b]!));
}

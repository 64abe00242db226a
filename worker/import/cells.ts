import type { Reason } from '../../src/imports/rejections';
import type { AttributeType } from '../../src/schema/service';
import {
  NOT_OF_TYPE,
  NOT_SENT,
  readText,
  splitList,
  tooLong,
  textToRead,
  TOO_LONG,
  validEmail,
} from '../../src/schema/values';

/**
 * One CSV data row → the staging table's fields of it (StagedRow), or undefined when the row is
 * malformed. This runs once per row of files up to 25 million rows, so it avoids what it can:
 * no regex per cell, no object per cell (one StagedRow is reused for every row), attributes JSON
 * built as text, md5 through Bun's native one-shot hash into bytes (its hex text cost more than the
 * hash; staging-binary.ts writes the bytes as they are).
 *
 * Attribute cells are read by the service's one reader of attribute values (readText of
 * src/schema/values.ts, the same rules as a request's text): trimmed, an empty cell is "not sent",
 * over 255 characters, a NUL or a value that is not of its type makes the row malformed.
 * The Email and Brand cells are read here, trimmed and bounded alike:
 * - Email: a valid address, the contact's identity;
 * - Brand: split on `;` like a list; entries are names (case-insensitive) or ids of the account's
 *   live brands; one that matches none makes the row malformed; repeats count once; the import's
 *   own brands are added.
 */

const ATTRIBUTE = 0;
const IDENTITY = 1;
const BRAND = 2;

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

/** What the staging table holds of one row (rowsTableDdl), as the read phase hands it to the COPY. */
export interface StagedRow {
  rowNo: number;
  /** md5 of the lowercased email, 16 bytes */
  md5: Uint8Array;
  /** the email as written, trimmed */
  email: string;
  /** the members of the attributes' JSON object, without its braces (`"a":1,"b":"x"`) */
  attributes: string;
  /** the brands' ids, each once; undefined for none */
  brandIds: string[] | undefined;
  /** how many attributes the row sent */
  attributeCount: number;
}

export class RowReader {
  private readonly kinds: number[];
  /** The attribute type of each column (`string` for Email and Brand, which are not read by type). */
  private readonly types: AttributeType[];
  /** `"name":` of each column, JSON-encoded once. */
  private readonly keys: string[];
  /** Column indexes in the order their keys are written (see jsonbKeyOrder). */
  private readonly order: number[];
  /**
   * Why the last row `read` refused was refused, and the index of the column at fault (-1: the
   * row as a whole). Set only on a refusal, so the common path pays nothing for it; with several
   * faults in one row it names the first one met (cells are read in jsonbKeyOrder).
   */
  reason: Reason = 'wrong_field_count';
  column = -1;
  /** The last row `read` took; overwritten by the next call (its md5 bytes too). */
  readonly row: StagedRow = {
    rowNo: 0,
    md5: new Uint8Array(16),
    email: '',
    attributes: '',
    brandIds: undefined,
    attributeCount: 0,
  };

  constructor(
    columns: readonly Column[],
    private readonly brands: BrandIndex,
    private readonly importBrandIds: readonly string[],
  ) {
    this.kinds = columns.map((c) => (c.type === 'identity' ? IDENTITY : c.type === 'brand' ? BRAND : ATTRIBUTE));
    this.types = columns.map((c) => (c.type === 'identity' || c.type === 'brand' ? 'string' : c.type));
    this.keys = columns.map((c) => `${JSON.stringify(c.name)}:`);
    this.order = jsonbKeyOrder(columns);
  }

  /** The row's staging fields (this.row, reused), or undefined when the row is malformed. */
  read(rowNo: number, cells: readonly string[]): StagedRow | undefined {
    const kinds = this.kinds;
    if (cells.length !== kinds.length) return this.refuse('wrong_field_count', -1);
    let email: string | undefined;
    let json = '';
    let sent = 0;
    let brandIds: string[] | undefined;
    const order = this.order;
    for (let k = 0; k < order.length; k++) {
      const i = order[k]!;
      // Every cell is trimmed by the one rule for a value's spaces, Email and Brand cells too.
      const text = textToRead(cells[i]!);
      if (text.length === 0) continue;
      if (kinds[i] === ATTRIBUTE) {
        const type = this.types[i]!;
        const value = readText(type, text, 'cell');
        if (typeof value !== 'string')
          return this.refuse(
            value === NOT_OF_TYPE ? 'wrong_type' : value === TOO_LONG ? 'value_too_long' : 'nul_character',
            i,
          );
        if (value === NOT_SENT) continue;
        json += json.length === 0 ? this.keys[i]! + value : `,${this.keys[i]!}${value}`;
        sent++;
        continue;
      }
      if (text.indexOf('\0') !== -1) return this.refuse('nul_character', i);
      if (tooLong(text)) return this.refuse('value_too_long', i);
      if (kinds[i] === IDENTITY) {
        if (!validEmail(text)) return this.refuse('invalid_email', i);
        email = text;
        continue;
      }
      const list = splitList(text);
      if (list === undefined) return this.refuse('value_too_long', i);
      for (const entry of list) {
        const id = this.brands.resolve(entry);
        if (id === undefined) return this.refuse('unknown_brand', i);
        brandIds ??= [];
        if (!brandIds.includes(id)) brandIds.push(id);
      }
    }
    if (email === undefined) return this.refuse('missing_email', kinds.indexOf(IDENTITY));
    for (const id of this.importBrandIds) {
      brandIds ??= [];
      if (!brandIds.includes(id)) brandIds.push(id);
    }
    const row = this.row;
    Bun.MD5.hash(email.toLowerCase(), row.md5);
    row.rowNo = rowNo;
    row.email = email;
    row.attributes = json;
    row.brandIds = brandIds;
    row.attributeCount = sent;
    return row;
  }

  private refuse(reason: Reason, column: number): undefined {
    this.reason = reason;
    this.column = column;
    return undefined;
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

/**
 * The one reader of attribute values, for API requests and CSV cells alike: readText is the rule,
 * from a value's text to the JSON text of its stored value. It and its primitives are plain
 * character scans, no regex and no allocation beyond the result: the import's hot loop
 * (worker/import/cells.ts) calls it up to 25 million times a column and writes its JSON text as it
 * is; readAttributeValue (requests, and cells read one at a time) parses it into a typed value.
 */
import type { AttributeType } from './service';

export const MAX_CELL = 255;

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
 * Entries are trimmed (textToRead) and empty ones dropped. Undefined when an entry is over 255
 * characters.
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
      const entry = textToRead(current + cell.slice(from, i));
      if (entry.length > 0) out.push(entry);
      current = '';
      from = i + 1;
    }
  }
  const last = textToRead(current + cell.slice(from));
  if (last.length > 0) out.push(last);
  for (const e of out) if (tooLong(e)) return undefined;
  return out;
}

/** A character JSON.stringify would escape, or a surrogate (lone or paired). */
const NEEDS_STRINGIFY = /[\u0000-\u001f"\\\ud800-\udfff]/;

/**
 * `JSON.stringify(s)` for a string: most cells need no escape at all, and one regex test (compiled
 * by the engine) is cheaper than the general serializer, which stays in charge of anything with
 * `"`, `\`, a control character or a surrogate.
 */
export function jsonString(s: string): string {
  return NEEDS_STRINGIFY.test(s) ? JSON.stringify(s) : `"${s}"`;
}

/** The JSON text of a decimal number cell (`-1`, `+2.5`, `.5`, `3.`, `1e3`), or undefined. */
export function readNumber(cell: string): string | undefined {
  // Already canonical, so `String(Number(cell))` would give it back unchanged: an optional `-`, a
  // first digit 1-9 (no leading zero, a value >= 1, so never exponent notation below 1e21), at
  // most 15 digits in all (exactly representable and printed back digit for digit), and a fraction,
  // if any, that neither is empty nor ends in 0.
  const n = cell.length;
  let i = cell.charCodeAt(0) === 0x2d ? 1 : 0;
  const first = cell.charCodeAt(i);
  if (first >= 0x31 && first <= 0x39 && n - i <= 16) {
    let digits = 0;
    let dot = -1;
    for (; i < n; i++) {
      const c = cell.charCodeAt(i);
      if (isDigit(c)) digits++;
      else if (c === 0x2e && dot === -1) dot = i;
      else break;
    }
    if (i === n && digits <= 15 && (dot === -1 || (dot < n - 1 && cell.charCodeAt(n - 1) !== 0x30))) return cell;
  }
  return readNumberSlow(cell);
}

function readNumberSlow(cell: string): string | undefined {
  let i = cell.charCodeAt(0) === 0x2b || cell.charCodeAt(0) === 0x2d ? 1 : 0;
  let digits = 0;
  for (; i < cell.length && isDigit(cell.charCodeAt(i)); i++) digits++;
  if (cell.charCodeAt(i) === 0x2e /* . */) {
    i++;
    for (; i < cell.length && isDigit(cell.charCodeAt(i)); i++) digits++;
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
for (const c of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.!#$%&'*+/=?^_`{|}~-")
  LOCAL_CHAR[c.charCodeAt(0)] = 1;

function isAlnum(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39);
}

/**
 * Exactly `isValidEmail` of src/contacts/email.ts (the service's one email rule), as a single
 * character scan: the regex version costs about half of the per-row budget at 25 million rows.
 * test/imports/import-pipeline-cells.test.ts checks that both agree.
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
  // By length and letters (| 0x20 folds ASCII case): no lowercased copy of every boolean cell.
  const c = cell.charCodeAt(0) | 0x20;
  switch (cell.length) {
    case 1:
      return cell === '1' ? 'true' : cell === '0' ? 'false' : undefined;
    case 2:
      return c === 0x6e && (cell.charCodeAt(1) | 0x20) === 0x6f ? 'false' : undefined; // no
    case 3:
      return c === 0x79 && sameLetters(cell, 'yes') ? 'true' : undefined;
    case 4:
      return c === 0x74 && sameLetters(cell, 'true') ? 'true' : undefined;
    case 5:
      return c === 0x66 && sameLetters(cell, 'false') ? 'false' : undefined;
    default:
      return undefined;
  }
}

/** `cell` equals the lowercase ASCII word `word` in any case (same length assumed). */
function sameLetters(cell: string, word: string): boolean {
  for (let i = 1; i < word.length; i++) if ((cell.charCodeAt(i) | 0x20) !== word.charCodeAt(i)) return false;
  return true;
}

export type AttributeValue = string | number | boolean | string[];

/**
 * Where a value comes from, the one way a request and a file differ:
 * - `request`: a JSON value. Native booleans, numbers and arrays are taken as they are (numbers and
 *   booleans also as the text of a `string` attribute or a list entry).
 * - `cell`: the text of a CSV cell, at most 255 characters whatever its type (the spec's malformed
 *   rows: "a row with any other cell over 255 characters").
 * Everything else is one rule for both (readText): every text, a `string` value's too, is trimmed
 * (textToRead) and "not sent" when that leaves nothing; list text splits on `;` (`\;` a literal
 * semicolon) into trimmed entries, empty ones dropped (a JSON array's entries are trimmed and
 * dropped alike); 255 code points at most for a text and for each list entry; no NUL and no
 * unpaired surrogate (PostgreSQL stores neither); booleans are true/false/yes/no/1/0 in any case;
 * numbers decimal.
 */
export type ValueSource = 'request' | 'cell';

/** readText's refusals; their wording is readAttributeValue's, a file only counts them. */
export const NOT_OF_TYPE = 1;
export const TOO_LONG = 2;
export const NOT_STORABLE = 3;
export type Refusal = typeof NOT_OF_TYPE | typeof TOO_LONG | typeof NOT_STORABLE;

/** What readText gives for a text that is empty once trimmed: the value is not sent. */
export const NOT_SENT = '';

/**
 * `s.trim()`, called only when an end could be whitespace (ASCII space or control, or any
 * non-ASCII character, which trim() may also count as space): most cells are returned as they are.
 */
export function trimEnds(s: string): string {
  const n = s.length;
  if (n === 0) return s;
  const first = s.charCodeAt(0);
  const last = s.charCodeAt(n - 1);
  return first <= 0x20 || first >= 0x80 || last <= 0x20 || last >= 0x80 ? s.trim() : s;
}

/**
 * The one rule for the spaces around a value, the API's and the importer's alike (issue 54): a text
 * is trimmed (trimEnds: what String.prototype.trim counts as space, line breaks, no-break spaces and
 * a BOM included). A spreadsheet's CSV quotes a cell only for a comma, quote or line break, and a
 * quote-all export quotes every cell, so a cell's quotes say nothing about whether its spaces were
 * meant; a request's text is held to the same rule, so every stored value exports and imports back
 * as itself. Its callers trim, rather than readText itself: called inside it, trimming cost the
 * import's hot loop a quarter of its time per row (the hot loop trims every cell with this, Email
 * and Brand too).
 */
export function textToRead(text: string): string {
  return trimEnds(text);
}

/**
 * THE rule: the text of a value of `type` (as textToRead gives it), as the JSON text of its stored
 * value, NOT_SENT, or why it is refused. The import's hot loop writes the JSON text as it is
 * (worker/import/cells.ts); readAttributeValue parses it. Plain scans, no allocation for a valid
 * text beyond its JSON.
 * @example readText('boolean', 'Yes', 'cell') // 'true'
 * @example readText('array', 'a; b\\;c ;', 'request') // '["a","b;c"]'
 * @example readText('boolean', '__proto__', 'request') // NOT_OF_TYPE
 */
export function readText(type: AttributeType, s: string, from: ValueSource): string | Refusal {
  if (s.length === 0) return NOT_SENT;
  if (s.indexOf('\0') !== -1) return NOT_STORABLE;
  if ((type === 'string' || from === 'cell') && tooLong(s)) return TOO_LONG;
  switch (type) {
    case 'string': {
      const json = jsonString(s);
      // Only an escaped text can hold a surrogate: the well-formed check is off the common path.
      return json.length === s.length + 2 || s.isWellFormed() ? json : NOT_STORABLE;
    }
    case 'email':
      return validEmail(s) ? jsonString(s) : NOT_OF_TYPE; // a valid address needs no escape
    case 'number':
      return readNumber(s) ?? NOT_OF_TYPE;
    case 'boolean':
      return readBoolean(s) ?? NOT_OF_TYPE;
    case 'array': {
      const list = splitList(s);
      if (list === undefined) return TOO_LONG;
      if (list.length === 0) return NOT_SENT;
      const json = JSON.stringify(list);
      // JSON.stringify escapes a lone surrogate, so a JSON text without a backslash holds none.
      return json.indexOf('\\') === -1 || s.isWellFormed() ? json : NOT_STORABLE;
    }
  }
}

export type ReadValue = { value: AttributeValue } | { empty: true } | { error: string };

const NOT_OF_TYPE_TEXT: Record<AttributeType, string> = {
  string: 'takes text',
  email: 'must be a valid email address',
  number: 'takes a decimal number',
  boolean: 'takes true or false',
  array: 'takes a list of text values',
};

/** Why readText refused a value of attribute `name`, in words. */
function refusalText(why: Refusal, type: AttributeType, name: string): string {
  if (why === NOT_STORABLE) return `Attribute ${name} contains a NUL character or invalid Unicode.`;
  if (why === TOO_LONG)
    return type === 'array'
      ? `An entry of attribute ${name} is longer than ${MAX_CELL} characters.`
      : `Attribute ${name} holds at most ${MAX_CELL} characters.`;
  return `Attribute ${name} ${NOT_OF_TYPE_TEXT[type]}.`;
}

/** Text of a request value where text is taken: numbers and booleans read as their canonical text. */
const textOf = (raw: unknown) =>
  typeof raw === 'number' || typeof raw === 'boolean' ? String(raw) : typeof raw === 'string' ? raw : undefined;

/**
 * Reads one value as its attribute's type: a request's native JSON value, or any text through
 * readText. `name` is only for the error text.
 * @example readAttributeValue('boolean', ' Yes ', 'vip', 'cell') // { value: true }
 * @example readAttributeValue('boolean', '__proto__', 'vip', 'request')
 *   // { error: 'Attribute vip takes true or false.' }
 */
export function readAttributeValue(type: AttributeType, raw: unknown, name: string, from: ValueSource): ReadValue {
  if (from === 'request') {
    if (type === 'boolean' && typeof raw === 'boolean') return { value: raw };
    if (type === 'number' && typeof raw === 'number')
      return Number.isFinite(raw) ? { value: raw } : { error: refusalText(NOT_OF_TYPE, type, name) };
    if (type === 'array' && Array.isArray(raw)) return readEntries(raw, name);
  }
  const text = type === 'string' && from === 'request' ? textOf(raw) : typeof raw === 'string' ? raw : undefined;
  if (text === undefined) return { error: refusalText(NOT_OF_TYPE, type, name) };
  const json = readText(type, textToRead(text), from);
  if (typeof json === 'number') return { error: refusalText(json, type, name) };
  return json === NOT_SENT ? { empty: true } : { value: JSON.parse(json) as AttributeValue };
}

/**
 * A JSON array: each entry text (or a number or boolean as text), trimmed like the entries of a
 * list text and read by the same rule as a text value; empty entries dropped.
 */
function readEntries(entries: readonly unknown[], name: string): ReadValue {
  const list: string[] = [];
  for (const [i, entry] of entries.entries()) {
    const raw = textOf(entry);
    if (raw === undefined) return { error: `Entry ${i} of attribute ${name} must be text.` };
    const text = textToRead(raw);
    const json = readText('string', text, 'request');
    if (json === NOT_STORABLE)
      return { error: `Entry ${i} of attribute ${name} contains a NUL character or invalid Unicode.` };
    if (json === TOO_LONG) return { error: `Entry ${i} of attribute ${name} is longer than ${MAX_CELL} characters.` };
    if (json !== NOT_SENT) list.push(text);
  }
  // A list left with no entry is no value, like an empty string.
  return list.length ? { value: list } : { empty: true };
}

/**
 * Whether a stored value is of its attribute's type: what a response may show. Every write goes
 * through readAttributeValue, so only a row written by other hands can fail this.
 */
export function isValueOf(type: AttributeType, value: unknown): value is AttributeValue {
  switch (type) {
    case 'string':
    case 'email':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'array':
      return Array.isArray(value) && value.every((e) => typeof e === 'string');
  }
}

/**
 * The one reader of attribute values, for API requests and CSV cells alike. Its primitives are
 * plain character scans, no regex and no allocation beyond the result: the import's hot loop
 * (worker/import/cells.ts) calls them up to 25 million times a column and writes their results as
 * JSON text; readAttributeValue composes the same primitives into typed values for requests.
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

export type ReadValue = { value: AttributeValue } | { empty: true } | { error: string };

/**
 * Where a value comes from, the one way a request and a file differ:
 * - `request`: a JSON value. Native booleans, numbers and arrays are taken as they are (numbers and
 *   booleans also as the text of a `string` attribute or a list entry), and a `string` attribute's
 *   text is stored exactly as sent.
 * - `cell`: the text of a CSV cell, trimmed as a whole first.
 * Everything else is one rule for both: email, number and boolean text is trimmed; list text splits
 * on `;` (`\;` a literal semicolon) into trimmed entries, empty ones dropped; 255 code points at
 * most for a text and for each list entry; no NUL and no unpaired surrogate (PostgreSQL stores
 * neither); booleans are true/false/yes/no/1/0 in any case; numbers are decimal.
 */
export type ValueSource = 'request' | 'cell';

/** PostgreSQL text (and jsonb) refuses NUL and unpaired surrogates. */
const storable = (s: string) => s.indexOf('\0') === -1 && s.isWellFormed();

/** Text of a request value: numbers and booleans read as their canonical text. */
const textOf = (raw: unknown) => (typeof raw === 'number' || typeof raw === 'boolean' ? String(raw) : typeof raw === 'string' ? raw : undefined);

/**
 * Reads one value as its attribute's type. `name` is only for the error text.
 * @example readAttributeValue('boolean', ' Yes ', 'vip', 'cell') // { value: true }
 * @example readAttributeValue('boolean', '__proto__', 'vip', 'request') // { error: 'Attribute vip takes true or false.' }
 */
export function readAttributeValue(type: AttributeType, raw: unknown, name: string, from: ValueSource): ReadValue {
  const native = from === 'request';
  let text = native ? textOf(raw) : typeof raw === 'string' ? raw.trim() : undefined;
  if (text === '') return { empty: true };
  switch (type) {
    case 'string': {
      if (text === undefined) return { error: `Attribute ${name} takes text.` };
      if (!storable(text)) return { error: `Attribute ${name} contains a NUL character or invalid Unicode.` };
      return tooLong(text) ? { error: `Attribute ${name} holds at most ${MAX_CELL} characters.` } : { value: text };
    }
    case 'email': {
      text = typeof raw === 'string' ? raw.trim() : undefined;
      return text !== undefined && validEmail(text) ? { value: text } : { error: `Attribute ${name} must be a valid email address.` };
    }
    case 'number': {
      if (native && typeof raw === 'number') return Number.isFinite(raw) ? { value: raw } : { error: `Attribute ${name} takes a decimal number.` };
      const json = typeof raw === 'string' ? readNumber(raw.trim()) : undefined;
      return json === undefined ? { error: `Attribute ${name} takes a decimal number.` } : { value: Number(json) };
    }
    case 'boolean': {
      if (native && typeof raw === 'boolean') return { value: raw };
      const json = typeof raw === 'string' ? readBoolean(raw.trim()) : undefined;
      return json === undefined ? { error: `Attribute ${name} takes true or false.` } : { value: json === 'true' };
    }
    case 'array':
      return native && Array.isArray(raw) ? readEntries(raw, name) : readListText(typeof raw === 'string' ? raw : undefined, name);
  }
}

/** A JSON array: each entry text (or a number or boolean as text) as sent; empty entries dropped. */
function readEntries(entries: readonly unknown[], name: string): ReadValue {
  const list: string[] = [];
  for (const [i, entry] of entries.entries()) {
    const text = textOf(entry);
    if (text === undefined) return { error: `Entry ${i} of attribute ${name} must be text.` };
    if (!storable(text)) return { error: `Entry ${i} of attribute ${name} contains a NUL character or invalid Unicode.` };
    if (tooLong(text)) return { error: `Entry ${i} of attribute ${name} is longer than ${MAX_CELL} characters.` };
    if (text !== '') list.push(text);
  }
  // A list left with no entry is no value, like an empty string.
  return list.length ? { value: list } : { empty: true };
}

/** The text form of a list, split by the same splitList as a CSV cell. */
function readListText(text: string | undefined, name: string): ReadValue {
  if (text === undefined) return { error: `Attribute ${name} takes a list of text values.` };
  // Trimmed whole first, as a cell is: splitList leaves a cell without `;` as it is.
  const trimmed = text.trim();
  if (trimmed === '') return { empty: true };
  const list = splitList(trimmed);
  if (list === undefined) return { error: `An entry of attribute ${name} is longer than ${MAX_CELL} characters.` };
  const bad = list.findIndex((e) => !storable(e));
  if (bad !== -1) return { error: `Entry ${bad} of attribute ${name} contains a NUL character or invalid Unicode.` };
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

import { invalidRequest, pointer, type FieldError } from '../errors';
import { PREDEFINED, type AttributeType, type SchemaAttribute } from '../schema/service';
import { DERIVED_SUB_KEYS, derivedOf, isValidEmail } from './email';

export type AttributeValue = string | number | boolean | string[];
/** Stored form: canonical schema name → typed JSON value. */
export type Attributes = Record<string, AttributeValue>;

export const MAX_TEXT = 255;

/** What a create or patch body asks for: values to set and (patch only) names to remove. */
export interface AttributeChanges {
  set: Attributes;
  remove: string[];
}

/** Characters as the spec counts them (code points, like PostgreSQL's char_length). */
const lengthOf = (s: string) => [...s].length;

const BOOLEAN_TEXT: Record<string, boolean> = { true: true, false: false, yes: true, no: false, '1': true, '0': false };
const DECIMAL = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** Splits the canonical text of a list like a CSV cell: `;` separates, `\;` is a literal semicolon. */
function splitList(text: string): string[] {
  const out: string[] = [];
  let current = '';
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\' && text[i + 1] === ';') {
      current += ';';
      i++;
    } else if (text[i] === ';') {
      out.push(current);
      current = '';
    } else current += text[i];
  }
  out.push(current);
  return out;
}

type Read = { value: AttributeValue } | { empty: true } | { error: string };

/** PostgreSQL text (and jsonb) refuses NUL and unpaired surrogates; they are a 400, not a 500. */
const storable = (s: string) => !s.includes('\u0000') && s.isWellFormed();

/** Text, with numbers and booleans read as their canonical text. */
const textOf = (raw: unknown) => (typeof raw === 'number' || typeof raw === 'boolean' ? String(raw) : typeof raw === 'string' ? raw : undefined);

/** Reads a request value as its schema type (native JSON or canonical text). */
export function readValue(type: AttributeType, raw: unknown, name: string): Read {
  if (raw === '') return { empty: true };
  switch (type) {
    case 'string': {
      const text = textOf(raw);
      if (text === undefined) return { error: `Attribute ${name} takes text.` };
      if (!storable(text)) return { error: `Attribute ${name} contains a NUL character or invalid Unicode.` };
      return lengthOf(text) > MAX_TEXT ? { error: `Attribute ${name} holds at most ${MAX_TEXT} characters.` } : { value: text };
    }
    case 'email': {
      if (typeof raw !== 'string') return { error: `Attribute ${name} takes an email address.` };
      const address = raw.trim();
      return isValidEmail(address) ? { value: address } : { error: `Attribute ${name} must be a valid email address.` };
    }
    case 'number': {
      if (typeof raw === 'number' && Number.isFinite(raw)) return { value: raw };
      const n = typeof raw === 'string' && DECIMAL.test(raw.trim()) ? Number(raw.trim()) : NaN;
      return Number.isFinite(n) ? { value: n } : { error: `Attribute ${name} takes a decimal number.` };
    }
    case 'boolean': {
      if (typeof raw === 'boolean') return { value: raw };
      const b = typeof raw === 'string' ? BOOLEAN_TEXT[raw.trim().toLowerCase()] : undefined;
      return b === undefined ? { error: `Attribute ${name} takes true or false.` } : { value: b };
    }
    case 'array': {
      const entries = Array.isArray(raw) ? raw : typeof raw === 'string' ? splitList(raw) : undefined;
      if (!entries) return { error: `Attribute ${name} takes a list of text values.` };
      const list: string[] = [];
      for (const [i, entry] of entries.entries()) {
        const text = textOf(entry);
        if (text === undefined) return { error: `Entry ${i} of attribute ${name} must be text.` };
        if (!storable(text)) return { error: `Entry ${i} of attribute ${name} contains a NUL character or invalid Unicode.` };
        if (lengthOf(text) > MAX_TEXT) return { error: `Entry ${i} of attribute ${name} is longer than ${MAX_TEXT} characters.` };
        if (text !== '') list.push(text);
      }
      // Empty entries are dropped; a list left with none is no value, like an empty string.
      return list.length ? { value: list } : { empty: true };
    }
  }
}

/** The account's writable attributes, matched case-insensitively and stored under the schema's name. */
export class AttributeSchema {
  private readonly byLower = new Map<string, SchemaAttribute>();
  private readonly emailNames = new Set<string>();

  constructor(readonly custom: readonly SchemaAttribute[]) {
    for (const a of custom) this.byLower.set(a.name.toLowerCase(), a);
    for (const a of [...PREDEFINED, ...custom]) if (a.type === 'email') this.emailNames.add(a.name.toLowerCase());
  }

  /** Why a request key is not a writable attribute, or the attribute it names. */
  resolve(key: string): SchemaAttribute | string {
    const lower = key.toLowerCase();
    const found = this.byLower.get(lower);
    if (found) return found;
    if (lower === 'email') return 'Email is the contact’s identity: it is set once by the create request’s email field and is not writable as an attribute.';
    if (lower === 'brand') return 'Brand is not writable as an attribute: manage brands with brandIds and the contact brands endpoints.';
    const colon = lower.lastIndexOf(':');
    if (colon > 0 && this.emailNames.has(lower.slice(0, colon)) && (DERIVED_SUB_KEYS as readonly string[]).includes(lower.slice(colon + 1))) {
      return `${key} is a derived sub-attribute: it is computed from the email attribute and is read-only.`;
    }
    return `Unknown attribute ${key}: it is not in the contact schema.`;
  }

  /**
   * Validates a body's `attributes` against the schema; every problem is reported, each with the
   * pointer `/attributes/<name as sent>`. On create, empty strings and null count as not sent; on
   * patch, null removes and an empty value is rejected.
   */
  read(input: Record<string, unknown>, mode: 'create' | 'patch'): AttributeChanges {
    const changes: AttributeChanges = { set: {}, remove: [] };
    const errors: FieldError[] = [];
    const seen = new Set<string>();
    for (const [key, raw] of Object.entries(input)) {
      const fail = (detail: string) => errors.push({ detail, pointer: pointer('attributes', key) });
      const attribute = this.resolve(key);
      if (typeof attribute === 'string') {
        fail(attribute);
        continue;
      }
      if (seen.has(attribute.name)) {
        fail(`Attribute ${attribute.name} is given more than once (names are case-insensitive).`);
        continue;
      }
      seen.add(attribute.name);
      if (raw === null) {
        if (mode === 'patch') changes.remove.push(attribute.name);
        continue;
      }
      const r = readValue(attribute.type, raw, key);
      if ('error' in r) fail(r.error);
      else if ('value' in r) changes.set[attribute.name] = r.value;
      else if (mode === 'patch') fail(`Attribute ${key} is empty: send a value, or null to remove it.`);
    }
    if (errors.length) throw invalidRequest(errors[0]!.detail, errors);
    return changes;
  }

  /** Response `attributes`: schema order, each email-type value followed by its derived sub-attributes. */
  render(stored: Attributes): Attributes {
    const out: Attributes = {};
    for (const a of this.custom) {
      const value = stored[a.name];
      if (value === undefined) continue;
      out[a.name] = value;
      if (a.type === 'email' && typeof value === 'string') Object.assign(out, derivedOf(a.name, value));
    }
    // Values whose attribute is no longer in the schema are still the contact's data.
    for (const [name, value] of Object.entries(stored)) if (!(name in out)) out[name] = value;
    return out;
  }
}

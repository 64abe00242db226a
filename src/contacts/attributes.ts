import { invalidRequest, pointer, type FieldError } from '../errors';
import { PREDEFINED, type SchemaAttribute } from '../schema/service';
import { isValueOf, readAttributeValue, type AttributeValue } from '../schema/values';
import { DERIVED_SUB_KEYS, derivedOf } from './email';

export type { AttributeValue } from '../schema/values';
/** Stored form: canonical schema name → typed JSON value. */
export type Attributes = Record<string, AttributeValue>;

/** What a create or patch body asks for: values to set and (patch only) names to remove. */
export interface AttributeChanges {
  set: Attributes;
  remove: string[];
}

/**
 * A row's `attributes` as an object. Every write stores one; a jsonb null, list or scalar written by
 * other hands holds no attribute (as PATCH's patchedAttributes reads it in SQL).
 */
export function storedAttributes(value: unknown): Attributes {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Attributes) : {};
}

/** Why a key names no attribute of the schema: the one wording, wherever the key is met. */
function unknownAttribute(key: string): string {
  return `Unknown attribute ${key}: it is not in the contact schema.`;
}

/**
 * Refuses, on the body as parsed, an `attributes` key that would not survive being copied into an
 * object: assigning `__proto__` sets a prototype instead of a property, so Elysia's normaliser
 * silently dropped it (201 for a key that names nothing). It names no attribute (an attribute
 * cannot be created with an object-internal name), so it is the unknown-attribute 400.
 */
export function refuseUncopyableKeys(attributes: unknown): void {
  if (typeof attributes !== 'object' || attributes === null || !Object.hasOwn(attributes, '__proto__')) return;
  const detail = unknownAttribute('__proto__');
  throw invalidRequest(detail, [{ detail, pointer: pointer('attributes', '__proto__') }]);
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
    if (lower === 'email')
      return (
        'Email is the contact’s identity: it is set once by the create request’s email field ' +
        'and is not writable as an attribute.'
      );
    if (lower === 'brand')
      return 'Brand is not writable as an attribute: manage brands with brandIds and the contact brands endpoints.';
    const colon = lower.lastIndexOf(':');
    if (
      colon > 0 &&
      this.emailNames.has(lower.slice(0, colon)) &&
      (DERIVED_SUB_KEYS as readonly string[]).includes(lower.slice(colon + 1))
    ) {
      return `${key} is a derived sub-attribute: it is computed from the email attribute and is read-only.`;
    }
    return unknownAttribute(key);
  }

  /**
   * Validates a body's `attributes` against the schema; every problem is reported, each with the
   * pointer `/attributes/<name as sent>`. On create, empty strings and null count as not sent; on
   * patch, null removes and an empty value is rejected.
   */
  read(input: Record<string, unknown>, mode: 'create' | 'patch'): AttributeChanges {
    const changes: AttributeChanges = { set: Object.create(null) as Attributes, remove: [] };
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
      const r = readAttributeValue(attribute.type, raw, key, 'request');
      if ('error' in r) fail(r.error);
      else if ('value' in r) changes.set[attribute.name] = r.value;
      else if (mode === 'patch') fail(`Attribute ${key} is empty: send a value, or null to remove it.`);
    }
    if (errors.length) throw invalidRequest(errors[0]!.detail, errors);
    return changes;
  }

  /** Response `attributes`: schema order, each email-type value followed by its derived sub-attributes. */
  render(row: Attributes): Attributes {
    const out = Object.create(null) as Attributes;
    const stored = storedAttributes(row);
    for (const a of this.custom) {
      if (!Object.hasOwn(stored, a.name)) continue;
      const value: unknown = stored[a.name];
      // Every write is read by its type, so only a row written by other hands holds a value that
      // is not: it is left out rather than failing the response (and every later GET) with a 500.
      if (!isValueOf(a.type, value)) continue;
      out[a.name] = value;
      if (a.type === 'email') Object.assign(out, derivedOf(a.name, value as string));
    }
    // Values whose attribute is no longer in the schema are still the contact's data (attributes
    // are never removed, so this is a safeguard): shown when they are of some attribute type.
    for (const [name, value] of Object.entries(stored)) {
      if (Object.hasOwn(out, name) || this.byLower.has(name.toLowerCase())) continue;
      if (
        typeof value === 'string' ||
        typeof value === 'boolean' ||
        isValueOf('number', value) ||
        isValueOf('array', value)
      )
        out[name] = value;
    }
    return out;
  }
}

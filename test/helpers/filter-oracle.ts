/**
 * An in-memory evaluation of a contact filter (docs/searching.md, issue 56 item 2) over contacts as
 * the API returns them (GET /v1/contacts/{emailMd5}). Written from the documented rules, not from
 * src/search, so that the property test (test/search/search-property.test.ts) compares the service
 * with an independent reading of the language:
 *
 * - `and` / `or` / `not`; `{"enabled": b}`; `{"createdAt": {gte?, lt?}}` (gte inclusive, lt exclusive).
 * - An attribute leaf names `Email` (the identity), `Brand` (the brand ids), a custom attribute of the
 *   schema, or a derived sub-attribute of a custom email attribute (`work:md5`, `work:sha256`,
 *   `work:sha512`, `work:domain`, strings), in any case.
 * - `exists`: the contact has a value (a boolean `false` is one; an absent key is not; the identity
 *   always has one; Brand has one when the contact carries a brand id).
 * - string (and derived): eq / ne / in / prefix, exact and case-sensitive.
 * - number: eq / ne / in / gt / gte / lt / lte.
 * - boolean: eq.
 * - email (custom and `Email`): eq / in compared lowercased; domain: the part after the last `@`,
 *   lowercased, against the value lowercased.
 * - array and Brand: contains (one entry), containsAny (any of the entries).
 * - `ne` matches a contact that has a value other than V; a contact without the attribute matches
 *   neither `eq` nor `ne`.
 *
 * The filter is assumed valid (the API's 400s are tested over HTTP, not here).
 */

export type AttributeType = 'string' | 'number' | 'boolean' | 'email' | 'array';

/** A contact exactly as GET /v1/contacts/{emailMd5} gives it. */
export interface ApiContact {
  email: string;
  emailMd5: string;
  attributes: Record<string, string | number | boolean | string[]>;
  brandIds: string[];
  enabled: boolean;
  createdAt: string;
}

export type Filter =
  | { and: Filter[] }
  | { or: Filter[] }
  | { not: Filter }
  | { enabled: boolean }
  | { createdAt: { gte?: string; lt?: string } }
  | { attribute: string; op: string; value?: unknown };

/** The account's custom attributes: schema name (as the schema spells it) → type. */
export type OracleSchema = Record<string, AttributeType>;

const DERIVED = ['md5', 'sha256', 'sha512', 'domain'] as const;

type Target =
  | { kind: 'email' }
  | { kind: 'brand' }
  | { kind: 'custom'; key: string; type: AttributeType }
  | { kind: 'derived'; key: string };

/** What a leaf's NAME stands for, matched case-insensitively against the schema. */
function targetOf(schema: OracleSchema, name: string): Target {
  const lower = name.toLowerCase();
  if (lower === 'email') return { kind: 'email' };
  if (lower === 'brand') return { kind: 'brand' };
  for (const [key, type] of Object.entries(schema))
    if (key.toLowerCase() === lower) return { kind: 'custom', key, type };
  const colon = lower.lastIndexOf(':');
  if (colon > 0) {
    const base = lower.slice(0, colon);
    const sub = lower.slice(colon + 1);
    for (const [key, type] of Object.entries(schema))
      if (type === 'email' && key.toLowerCase() === base && (DERIVED as readonly string[]).includes(sub))
        return { kind: 'derived', key: `${key}:${sub}` };
  }
  throw new Error(`oracle: ${name} is not an attribute of the schema`);
}

const domainOf = (address: string) => address.toLowerCase().slice(address.lastIndexOf('@') + 1);

/** The leaf's value on the contact and the type its operators follow; undefined when the contact has none. */
function valueOf(c: ApiContact, target: Target): { type: AttributeType; value: unknown } | undefined {
  switch (target.kind) {
    case 'email':
      return { type: 'email', value: c.email };
    case 'brand':
      return c.brandIds.length > 0 ? { type: 'array', value: c.brandIds } : undefined;
    case 'custom': {
      const v = c.attributes[target.key];
      return v === undefined || v === null ? undefined : { type: target.type, value: v };
    }
    case 'derived': {
      const v = c.attributes[target.key];
      return v === undefined || v === null ? undefined : { type: 'string', value: v };
    }
  }
}

function compare(type: AttributeType, op: string, have: unknown, want: unknown): boolean {
  switch (type) {
    case 'string': {
      const s = have as string;
      if (op === 'eq') return s === want;
      if (op === 'ne') return s !== want;
      if (op === 'in') return (want as string[]).includes(s);
      if (op === 'prefix') return s.startsWith(want as string);
      break;
    }
    case 'number': {
      const n = have as number;
      const w = want as number;
      if (op === 'eq') return n === w;
      if (op === 'ne') return n !== w;
      if (op === 'in') return (want as number[]).includes(n);
      if (op === 'gt') return n > w;
      if (op === 'gte') return n >= w;
      if (op === 'lt') return n < w;
      if (op === 'lte') return n <= w;
      break;
    }
    case 'boolean':
      if (op === 'eq') return have === want;
      break;
    case 'email': {
      const a = (have as string).toLowerCase();
      if (op === 'eq') return a === (want as string).toLowerCase();
      if (op === 'in') return (want as string[]).some((w) => w.toLowerCase() === a);
      if (op === 'domain') return domainOf(have as string) === (want as string).toLowerCase();
      break;
    }
    case 'array': {
      const entries = have as string[];
      if (op === 'contains') return entries.includes(want as string);
      if (op === 'containsAny') return (want as string[]).some((w) => entries.includes(w));
      break;
    }
  }
  throw new Error(`oracle: ${type} takes no operator ${op}`);
}

/** Brand ids are UUIDs: compared without regard to case, as the API stores them lowercased. */
function normalised(target: Target, want: unknown): unknown {
  if (target.kind !== 'brand') return want;
  return Array.isArray(want) ? want.map((w) => String(w).toLowerCase()) : String(want).toLowerCase();
}

/** Whether the contact passes the filter. */
export function matches(schema: OracleSchema, filter: Filter, c: ApiContact): boolean {
  if ('and' in filter) return filter.and.every((f) => matches(schema, f, c));
  if ('or' in filter) return filter.or.some((f) => matches(schema, f, c));
  if ('not' in filter) return !matches(schema, filter.not, c);
  if ('enabled' in filter) return c.enabled === filter.enabled;
  if ('createdAt' in filter) {
    const at = Date.parse(c.createdAt);
    const { gte, lt } = filter.createdAt;
    return (gte === undefined || at >= Date.parse(gte)) && (lt === undefined || at < Date.parse(lt));
  }
  const target = targetOf(schema, filter.attribute);
  const have = valueOf(c, target);
  if (filter.op === 'exists') return have !== undefined;
  if (have === undefined) return false;
  return compare(have.type, filter.op, have.value, normalised(target, filter.value));
}

/** The contacts that pass (all of them without a filter), by emailMd5 ascending: what a search's pages joined give. */
export function evaluate(
  schema: OracleSchema,
  filter: Filter | undefined,
  contacts: readonly ApiContact[],
): ApiContact[] {
  return contacts
    .filter((c) => filter === undefined || matches(schema, filter, c))
    .sort((a, b) => (a.emailMd5 < b.emailMd5 ? -1 : a.emailMd5 > b.emailMd5 ? 1 : 0));
}

/** What GET /v1/contact-stats should answer, counted from the contacts; `liveBrands` in the API's order. */
export function statsOf(contacts: readonly ApiContact[], liveBrands: readonly string[]) {
  return {
    total: contacts.length,
    enabled: contacts.filter((c) => c.enabled).length,
    disabled: contacts.filter((c) => !c.enabled).length,
    brands: liveBrands.map((brandId) => ({
      brandId,
      count: contacts.filter((c) => c.brandIds.includes(brandId)).length,
    })),
  };
}

/**
 * A parsed contact filter (the filter language of POST /v1/contact-searches, /v1/contact-counts and
 * /v1/contact-exports; docs/searching.md): what filter.ts makes of a request's JSON once every rule
 * of the language held, and what compile.ts turns into SQL. Every node keeps `at`, the JSON pointer
 * of the node in the request body, so that a check made after parsing (a brand id the account does
 * not have) can still name the node at fault.
 */
import type { AttributeType } from '../schema/service';

/** The email-type attribute sub-keys a filter can name, as contacts' `attributes` show them. */
export type DerivedKey = 'md5' | 'sha256' | 'sha512' | 'domain';

/** What an attribute leaf reads from a contact. */
export type Target =
  /** the identity address (`Email`): `email`, `email_md5` */
  | { kind: 'email' }
  /** the contact's brand ids (`Brand`): `brand_ids` */
  | { kind: 'brand' }
  /** a custom attribute, by its schema name (stored under that name in `attributes`) */
  | { kind: 'custom'; name: string; type: AttributeType }
  /** `name:md5` … of a custom email-type attribute: a string computed from its value */
  | { kind: 'derived'; name: string; key: DerivedKey };

/** The type whose operators a target takes: Email is `email`, Brand `array`, a derived key `string`. */
export function typeOf(target: Target): AttributeType {
  switch (target.kind) {
    case 'email':
      return 'email';
    case 'brand':
      return 'array';
    case 'custom':
      return target.type;
    case 'derived':
      return 'string';
  }
}

export type Op =
  'exists' | 'eq' | 'ne' | 'in' | 'prefix' | 'gt' | 'gte' | 'lt' | 'lte' | 'domain' | 'contains' | 'containsAny';

/** Each type's operators (the table; docs/searching.md). */
export const OPS_OF: Record<AttributeType, readonly Op[]> = {
  string: ['exists', 'eq', 'ne', 'in', 'prefix'],
  number: ['exists', 'eq', 'ne', 'in', 'gt', 'gte', 'lt', 'lte'],
  boolean: ['exists', 'eq'],
  email: ['exists', 'eq', 'in', 'domain'],
  array: ['exists', 'contains', 'containsAny'],
};

export type Scalar = string | number | boolean;

export type FilterNode =
  | { kind: 'and' | 'or'; of: FilterNode[]; at: string }
  | { kind: 'not'; of: FilterNode; at: string }
  | { kind: 'enabled'; value: boolean; at: string }
  /** ISO 8601 instants as sent, checked to parse; at least one bound */
  | { kind: 'createdAt'; gte?: string; lt?: string; at: string }
  | { kind: 'exists'; target: Target; at: string }
  /**
   * Every other operator. `value` is a list for `in` and `containsAny` (1 to 100 entries), else one
   * value; of the target's type (a string for `prefix`, `domain`, `contains`). For Brand the entries
   * are lowercased brand ids.
   */
  | { kind: 'compare'; target: Target; op: Exclude<Op, 'exists'>; value: Scalar | Scalar[]; at: string };

/** Limits of the language. */
export const FILTER_LIMITS = {
  /** nodes on the path from the root to a leaf, the root and the leaf included */
  depth: 5,
  leaves: 50,
  /** entries of an `and` or `or` */
  children: 20,
  /** values of `in` and `containsAny` */
  values: 100,
  /** characters of a `prefix` (and of any string value) */
  text: 255,
} as const;

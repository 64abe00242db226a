/**
 * The filter language's parser (docs/searching.md): a request's JSON filter, checked rule by rule,
 * into the FilterNode tree of filter-types.ts. The first rule broken is thrown as one field error
 * whose pointer names the node (or the part of it) at fault; compile.ts only ever sees a tree that
 * held every rule. Also what callers need of a parsed filter: its brand ids, and a stable key.
 */
import { invalidField } from '../errors';
import type { AttributeType, SchemaAttribute } from '../schema/service';
import { tooLong } from '../schema/values';
import {
  FILTER_LIMITS,
  OPS_OF,
  typeOf,
  type DerivedKey,
  type FilterNode,
  type Op,
  type Scalar,
  type Target,
} from './filter-types';

/** The account's custom attributes (Email and Brand are known to the language itself). */
export interface FilterSchema {
  custom: readonly SchemaAttribute[];
}

type Json = Record<string, unknown>;

/** What one parse carries down the tree. */
interface Walk {
  schema: FilterSchema;
  /** the filter's own pointer: where the limits of the whole filter are reported */
  root: string;
  leaves: number;
}

const FORMS =
  'A filter is an object of exactly one of these forms: {"and": [...]}, {"or": [...]}, {"not": {...}}, ' +
  '{"enabled": true|false}, {"createdAt": {"gte"?, "lt"?}} or {"attribute", "op", "value"?}.';
const BRANCH_KEYS = ['and', 'or', 'not', 'enabled', 'createdAt'] as const;
const LEAF_KEYS = ['attribute', 'op', 'value'];
const DERIVED_KEYS: readonly string[] = ['md5', 'sha256', 'sha512', 'domain'] satisfies DerivedKey[];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Parses and validates a request's filter. Throws ApiError invalid_request_error at the first rule
 * broken. `at` is the pointer of the filter in the body; an absent filter is the caller's to handle.
 * @example parseFilter({ attribute: 'age', op: 'gt', value: 30 }, { custom: [{ name: 'Age', type: 'number' }] })
 *   // { kind: 'compare', target: { kind: 'custom', name: 'Age', type: 'number' }, op: 'gt', value: 30, at: '/filter' }
 */
export function parseFilter(raw: unknown, schema: FilterSchema, at = '/filter'): FilterNode {
  return parseNode(raw, at, 1, { schema, root: at, leaves: 0 });
}

function isObject(raw: unknown): raw is Json {
  return typeof raw === 'object' && raw !== null && !Array.isArray(raw);
}

/** A request's key, quoted for a detail, cut short: a detail never carries much request text. */
const quoted = (s: string) => JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}…` : s);

function parseNode(raw: unknown, at: string, depth: number, walk: Walk): FilterNode {
  if (depth > FILTER_LIMITS.depth)
    throw invalidField(walk.root, `A filter nests at most ${FILTER_LIMITS.depth} levels deep (the root is level 1).`);
  if (!isObject(raw)) throw invalidField(at, FORMS);
  const keys = Object.keys(raw);
  const unknown = keys.find((k) => !(BRANCH_KEYS as readonly string[]).includes(k) && !LEAF_KEYS.includes(k));
  if (unknown !== undefined) throw invalidField(at, `Unknown key ${quoted(unknown)}. ${FORMS}`);
  const forms = BRANCH_KEYS.filter((k) => k in raw);
  const leaf = keys.some((k) => LEAF_KEYS.includes(k));
  if (forms.length + (leaf ? 1 : 0) !== 1) throw invalidField(at, FORMS);
  const form = forms[0];
  if (form === 'and' || form === 'or') return parseList(form, raw[form], at, depth, walk);
  if (form === 'not') return { kind: 'not', of: parseNode(raw.not, `${at}/not`, depth + 1, walk), at };
  countLeaf(walk);
  if (form === 'enabled') return parseEnabled(raw.enabled, at);
  if (form === 'createdAt') return parseCreatedAt(raw.createdAt, at);
  return parseLeaf(raw, at, walk.schema);
}

function parseList(kind: 'and' | 'or', list: unknown, at: string, depth: number, walk: Walk): FilterNode {
  if (!Array.isArray(list) || list.length < 1 || list.length > FILTER_LIMITS.children)
    throw invalidField(`${at}/${kind}`, `"${kind}" takes a list of 1 to ${FILTER_LIMITS.children} filters.`);
  return { kind, of: list.map((entry, i) => parseNode(entry, `${at}/${kind}/${i}`, depth + 1, walk)), at };
}

function countLeaf(walk: Walk): void {
  if (++walk.leaves > FILTER_LIMITS.leaves)
    throw invalidField(walk.root, `A filter has at most ${FILTER_LIMITS.leaves} conditions (leaves) in all.`);
}

function parseEnabled(value: unknown, at: string): FilterNode {
  if (typeof value !== 'boolean') throw invalidField(`${at}/enabled`, '"enabled" takes true or false.');
  return { kind: 'enabled', value, at };
}

function parseCreatedAt(range: unknown, at: string): FilterNode {
  const here = `${at}/createdAt`;
  const shape = '"createdAt" takes an object with "gte", "lt" or both, each an RFC 3339 date-time.';
  if (!isObject(range)) throw invalidField(here, shape);
  const keys = Object.keys(range);
  if (keys.length === 0 || keys.some((k) => k !== 'gte' && k !== 'lt')) throw invalidField(here, shape);
  const node: FilterNode = { kind: 'createdAt', at };
  for (const bound of ['gte', 'lt'] as const) {
    if (!(bound in range)) continue;
    const text = range[bound];
    if (typeof text !== 'string' || instantOf(text) === undefined)
      throw invalidField(
        `${here}/${bound}`,
        `"${bound}" must be an RFC 3339 date-time with a time zone, such as 2026-01-02T03:04:05Z or ` +
          '2026-01-02T05:04:05.5+02:00, between the years 0001 and 9999.',
      );
    node[bound] = text;
  }
  return node;
}

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;
/** 0001-01-01T00:00:00Z: the first instant both JavaScript's ISO text and PostgreSQL spell alike. */
const MIN_INSTANT = new Date('0001-01-01T00:00:00Z').getTime();
const MAX_INSTANT = new Date('9999-12-31T23:59:59.999Z').getTime();

/**
 * Milliseconds since the epoch of an RFC 3339 date-time with a time zone, or undefined when the
 * text is not one or names no real instant (Feb 30, hour 24, a leap second). Digits past the
 * millisecond are dropped, as JavaScript's Date and the service's own timestamps in responses
 * drop them; compile.ts sends the instant re-serialised, so the database compares what this says.
 * @example instantOf('2026-01-02T05:04:05.1239+02:00') // Date.UTC(2026, 0, 2, 3, 4, 5, 123)
 */
export function instantOf(text: string): number | undefined {
  const m = DATE_TIME.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  const offsetHours = Number(m[9] ?? 0);
  const offsetMinutes = Number(m[10] ?? 0);
  if (offsetHours > 23 || offsetMinutes > 59) return undefined;
  const millis = Number(((m[7] ?? '') + '000').slice(0, 3));
  // Date.UTC reads years 0-99 as 1900-1999: place the year after.
  const date = new Date(Date.UTC(2000, month - 1, day, hour, minute, second, millis));
  date.setUTCFullYear(year);
  const instant = date.getTime() - (m[8] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000;
  return instant >= MIN_INSTANT && instant <= MAX_INSTANT ? instant : undefined;
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysIn(year: number, month: number): number {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  return month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!;
}

function parseLeaf(raw: Json, at: string, schema: FilterSchema): FilterNode {
  if (typeof raw.attribute !== 'string')
    throw invalidField(`${at}/attribute`, '"attribute" takes the name of an attribute of the contact schema.');
  const target = resolveTarget(raw.attribute, schema);
  if (!target)
    throw invalidField(
      `${at}/attribute`,
      `Unknown attribute ${quoted(raw.attribute)}: a filter names Email, Brand, a custom attribute of the ` +
        'contact schema, or <email attribute>:md5, :sha256, :sha512 or :domain (any case).',
    );
  const type = typeOf(target);
  const ops = OPS_OF[type];
  const label = `${nameOf(target)} (${type})`;
  if (typeof raw.op !== 'string' || !(ops as readonly string[]).includes(raw.op))
    throw invalidField(`${at}/op`, `Attribute ${label} takes the operators ${ops.join(', ')}.`);
  const op = raw.op as Op;
  if (op === 'exists') {
    if ('value' in raw) throw invalidField(`${at}/value`, 'The operator exists takes no "value".');
    return { kind: 'exists', target, at };
  }
  if (!('value' in raw)) throw invalidField(`${at}/value`, `The operator ${op} takes a "value".`);
  const value = parseValue(target, op, raw.value, `${at}/value`, `The value of ${op} on ${label}`);
  return { kind: 'compare', target, op, value, at };
}

/** The attribute a leaf names: the schema's own spelling of it, however the request cased it. */
function resolveTarget(name: string, schema: FilterSchema): Target | undefined {
  const lower = name.toLowerCase();
  if (lower === 'email') return { kind: 'email' };
  if (lower === 'brand') return { kind: 'brand' };
  const custom = schema.custom.find((a) => a.name.toLowerCase() === lower);
  if (custom) return { kind: 'custom', name: custom.name, type: custom.type };
  // A stored name never holds a colon (src/schema/change.ts), so `base:key` is always derived.
  const colon = lower.lastIndexOf(':');
  const base = lower.slice(0, colon);
  const key = lower.slice(colon + 1);
  const email = schema.custom.find((a) => a.type === 'email' && a.name.toLowerCase() === base);
  if (colon > 0 && email && DERIVED_KEYS.includes(key))
    return { kind: 'derived', name: email.name, key: key as DerivedKey };
  return undefined;
}

/** The name of a target as the schema spells it. */
export function nameOf(target: Target): string {
  switch (target.kind) {
    case 'email':
      return 'Email';
    case 'brand':
      return 'Brand';
    case 'custom':
      return target.name;
    case 'derived':
      return `${target.name}:${target.key}`;
  }
}

/** One value of the leaf's type, or a list of them for `in` and `containsAny`. */
function parseValue(target: Target, op: Exclude<Op, 'exists'>, raw: unknown, at: string, what: string) {
  const one = entryReader(target, op);
  if (op !== 'in' && op !== 'containsAny') return one.read(raw, at, what);
  const max = FILTER_LIMITS.values;
  if (!Array.isArray(raw) || raw.length < 1 || raw.length > max)
    throw invalidField(at, `${what} must be a list of 1 to ${max} values, each ${one.accepts}.`);
  return raw.map((entry, i) => one.read(entry, `${at}/${i}`, `Entry ${i} of ${what.replace(/^The/, 'the')}`));
}

interface EntryReader {
  /** what the reader accepts, for a detail: "a string of 1 to 255 characters" */
  accepts: string;
  read(raw: unknown, at: string, what: string): Scalar;
}

/** How one value (or one entry of a list) of this leaf is read. */
function entryReader(target: Target, op: Op): EntryReader {
  const type: AttributeType = typeOf(target);
  if (target.kind === 'brand') return brandId;
  if (op === 'eq' || op === 'ne' || op === 'in' || op === 'gt' || op === 'gte' || op === 'lt' || op === 'lte') {
    if (type === 'number') return finiteNumber;
    if (type === 'boolean') return booleanValue;
  }
  return text;
}

const TEXT_ACCEPTS = `a string of 1 to ${FILTER_LIMITS.text} characters`;

const text: EntryReader = {
  accepts: TEXT_ACCEPTS,
  read(raw, at, what) {
    if (typeof raw !== 'string' || raw.length === 0 || tooLong(raw))
      throw invalidField(at, `${what} must be ${TEXT_ACCEPTS}.`);
    // PostgreSQL's text holds neither, and no stored value has one: refused rather than sent.
    if (raw.includes('\0') || !raw.isWellFormed())
      throw invalidField(at, `${what} must be ${TEXT_ACCEPTS}, without NUL characters or invalid Unicode.`);
    return raw;
  },
};

const finiteNumber: EntryReader = {
  accepts: 'a JSON number',
  read(raw, at, what) {
    if (typeof raw !== 'number' || !Number.isFinite(raw))
      throw invalidField(at, `${what} must be a finite JSON number (not a string).`);
    return raw;
  },
};

const booleanValue: EntryReader = {
  accepts: 'true or false',
  read(raw, at, what) {
    if (typeof raw !== 'boolean') throw invalidField(at, `${what} must be true or false.`);
    return raw;
  },
};

const brandId: EntryReader = {
  accepts: 'a brand id (a UUID)',
  read(raw, at, what) {
    if (typeof raw !== 'string' || !UUID.test(raw)) throw invalidField(at, `${what} must be a brand id (a UUID).`);
    return raw.toLowerCase();
  },
};

/** Brand ids a filter names, each with the pointer of its value, for the caller's check. */
export function brandIdsOf(node: FilterNode): { id: string; at: string }[] {
  switch (node.kind) {
    case 'and':
    case 'or':
      return node.of.flatMap(brandIdsOf);
    case 'not':
      return brandIdsOf(node.of);
    case 'compare':
      if (node.target.kind !== 'brand') return [];
      if (Array.isArray(node.value))
        return node.value.map((id, i) => ({ id: String(id), at: `${node.at}/value/${i}` }));
      return [{ id: String(node.value), at: `${node.at}/value` }];
    default:
      return [];
  }
}

/**
 * A stable text of the filter's meaning, for cursors: resolved names, fixed order, instants
 * re-serialised, no pointers. The same filter sent again with other key order or name case gives
 * the same key; no filter gives '' (which no filter's key is).
 */
export function filterKey(node: FilterNode | undefined): string {
  return node === undefined ? '' : JSON.stringify(canonical(node));
}

function canonical(node: FilterNode): unknown {
  switch (node.kind) {
    case 'and':
    case 'or':
      return [node.kind, node.of.map(canonical)];
    case 'not':
      return ['not', canonical(node.of)];
    case 'enabled':
      return ['enabled', node.value];
    case 'createdAt':
      return ['createdAt', isoOf(node.gte), isoOf(node.lt)];
    case 'exists':
      return ['exists', targetKey(node.target)];
    case 'compare':
      return [node.op, targetKey(node.target), node.value];
  }
}

const isoOf = (text: string | undefined) => (text === undefined ? null : new Date(instantOf(text)!).toISOString());

function targetKey(target: Target): unknown[] {
  switch (target.kind) {
    case 'email':
    case 'brand':
      return [target.kind];
    case 'custom':
      return [target.kind, target.name, target.type];
    case 'derived':
      return [target.kind, target.name, target.key];
  }
}

/**
 * A parsed filter (filter.ts) as one SQL boolean expression over `contacts c`. Every attribute name
 * and every value goes through Params: the SQL text holds only what this file writes (operators,
 * columns, functions), never a request's text. The expression is two-valued (never NULL), so `not`
 * means what it says; leaves that can meet an absent or mistyped value answer false for it, and
 * leaves over columns that are never NULL stay bare so their indexes apply.
 */
import { md5ToUuid } from '../contacts/email';
import type { AttributeType } from '../schema/service';
import type { DerivedKey, FilterNode, Scalar, Target } from './filter-types';
import { instantOf } from './filter';

export type PgType =
  'text' | 'text[]' | 'numeric' | 'numeric[]' | 'jsonb' | 'uuid' | 'uuid[]' | 'timestamptz' | 'boolean';

export interface Params {
  /** Takes a value; gives the SQL that stands for it, cast to `pgType`. */
  add(value: unknown, pgType: PgType): string;
}

/**
 * Params for postgres.js `sql.unsafe(text, values)`: add() pushes the value and returns `$n::type`,
 * `first` the first n (the caller's own parameters come before).
 * @example const p = boundParams(2);
 *   sql.unsafe(`select … from contacts c where c.account_id = $1 and ${compileFilter(node, p)}`, [id, ...p.values]);
 */
export function boundParams(first: number): Params & { values: unknown[] } {
  const values: unknown[] = [];
  return {
    values,
    add(value, pgType) {
      values.push(boundValue(value, pgType));
      const n = first + values.length - 1;
      // jsonb goes as its JSON text: postgres.js would JSON.stringify a value it knows to be jsonb
      // (prepared) but send a string as it is (unprepared); a text parameter reads the same in both.
      return pgType === 'jsonb' ? `$${n}::text::jsonb` : `$${n}::${pgType}`;
    },
  };
}

/**
 * Numbers and instants are sent as their text: the cast reads them the same whether postgres.js
 * types the parameter from the prepared statement or from the JavaScript value (prepare: false).
 */
function boundValue(value: unknown, pgType: PgType): unknown {
  switch (pgType) {
    case 'numeric':
      return numberText(value);
    case 'numeric[]':
      return listOf(value).map(numberText);
    case 'timestamptz':
      return instantText(value);
    case 'jsonb':
      return JSON.stringify(value);
    default:
      return value;
  }
}

/**
 * Params whose placeholders are literals that carry no request text, for statements that take no
 * parameters (COPY): strings as the hex of their UTF-8 bytes, numbers, booleans and instants
 * re-serialised from the parsed value, arrays as `array[…]` of such literals.
 */
export function inlineParams(): Params {
  return { add: (value, pgType) => `${literal(value, pgType)}::${pgType}` };
}

function literal(value: unknown, pgType: PgType): string {
  if (pgType.endsWith('[]')) {
    const entry = pgType.slice(0, -2) as PgType;
    return `array[${listOf(value)
      .map((v) => `${literal(v, entry)}::${entry}`)
      .join(', ')}]`;
  }
  switch (pgType) {
    case 'numeric':
      return `'${numberText(value)}'`;
    case 'boolean':
      if (typeof value !== 'boolean') throw new TypeError(`not a boolean: ${typeof value}`);
      return String(value);
    case 'timestamptz':
      return `'${instantText(value)}'`;
    case 'jsonb':
      return hexText(JSON.stringify(value));
    default:
      if (typeof value !== 'string') throw new TypeError(`not a string: ${typeof value}`);
      return hexText(value);
  }
}

/** Any text, as an expression of hex digits only: no quote or backslash of the value can reach the SQL. */
const hexText = (s: string) => `convert_from(decode('${Buffer.from(s, 'utf8').toString('hex')}', 'hex'), 'UTF8')`;

/** String(n) of a finite number holds only digits, `.`, `e`, `+` and `-`. */
function numberText(value: unknown): string {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new TypeError('not a finite number');
  return String(value);
}

/** The instant re-serialised (toISOString: digits and `-:.TZ` only), at the precision filter.ts reads. */
function instantText(value: unknown): string {
  const ms = value instanceof Date ? value.getTime() : typeof value === 'string' ? instantOf(value) : undefined;
  if (ms === undefined || !Number.isFinite(ms)) throw new TypeError('not an instant');
  return new Date(ms).toISOString();
}

function listOf(value: unknown): unknown[] {
  if (!Array.isArray(value)) throw new TypeError('not a list');
  return value;
}

/**
 * The filter as an SQL boolean expression over alias `c`, never NULL.
 * @example compileFilter(parseFilter({ enabled: false }, schema), boundParams(2)) // '(c.enabled = $2::boolean)'
 */
export function compileFilter(node: FilterNode, p: Params): string {
  switch (node.kind) {
    case 'and':
    case 'or':
      return `(${node.of.map((n) => compileFilter(n, p)).join(` ${node.kind} `)})`;
    case 'not':
      return `(not ${compileFilter(node.of, p)})`;
    case 'enabled':
      return `(c.enabled = ${p.add(node.value, 'boolean')})`;
    case 'createdAt': {
      const bounds: string[] = [];
      if (node.gte !== undefined) bounds.push(`c.created_at >= ${p.add(node.gte, 'timestamptz')}`);
      if (node.lt !== undefined) bounds.push(`c.created_at < ${p.add(node.lt, 'timestamptz')}`);
      return `(${bounds.join(' and ')})`;
    }
    case 'exists':
      return `(${exists(node.target, p)})`;
    case 'compare':
      return `(${compare(node.target, node.op, node.value, p)})`;
  }
}

/** The JSON type (jsonb_typeof) a stored value of each attribute type has; any other is no value. */
const JSON_TYPE: Record<AttributeType, string> = {
  string: 'string',
  email: 'string',
  number: 'number',
  boolean: 'boolean',
  array: 'array',
};

function exists(target: Target, p: Params): string {
  switch (target.kind) {
    case 'email':
      return 'true';
    case 'brand':
      return 'cardinality(c.brand_ids) > 0';
    case 'custom':
    case 'derived': {
      // a derived key exists when its email attribute does
      const jsonType = target.kind === 'custom' ? JSON_TYPE[target.type] : 'string';
      return `coalesce(jsonb_typeof(c.attributes -> ${p.add(target.name, 'text')}) = '${jsonType}', false)`;
    }
  }
}

type CompareOp = Extract<FilterNode, { kind: 'compare' }>['op'];

function compare(target: Target, op: CompareOp, value: Scalar | Scalar[], p: Params): string {
  switch (target.kind) {
    case 'email':
      return identityEmail(op, value, p);
    case 'brand':
      return op === 'contains'
        ? `c.brand_ids @> array[${p.add(value, 'uuid')}]`
        : `c.brand_ids && ${p.add(value, 'uuid[]')}`;
    case 'custom':
      return custom(target.name, target.type, op, value, p);
    case 'derived':
      return derived(target.name, target.key, op, value, p);
  }
}

/** Lowercased in JavaScript, as the service lowercases an address for its md5 (src/contacts/email.ts). */
const lowered = (value: Scalar | Scalar[]) =>
  Array.isArray(value) ? value.map((v) => String(v).toLowerCase()) : String(value).toLowerCase();

const md5Uuid = (address: string) => md5ToUuid(Bun.MD5.hash(address.toLowerCase(), 'hex'));

/** The identity address: eq and in by email_md5, which the primary key answers. */
function identityEmail(op: CompareOp, value: Scalar | Scalar[], p: Params): string {
  if (op === 'eq') return `c.email_md5 = ${p.add(md5Uuid(String(value)), 'uuid')}`;
  if (op === 'in')
    return `c.email_md5 = any(${p.add(
      (value as Scalar[]).map((v) => md5Uuid(String(v))),
      'uuid[]',
    )})`;
  return `split_part(lower(c.email), '@', -1) = ${p.add(lowered(value), 'text')}`;
}

/**
 * `case when` the stored value has the attribute's JSON type `then` the test `else false`: the
 * test (a cast, a text function) runs only on a value of that type, which AND would not promise,
 * and an absent or mistyped value answers false, never NULL.
 */
const whenTyped = (stored: string, jsonType: string, test: string) =>
  `case when jsonb_typeof(${stored}) = '${jsonType}' then ${test} else false end`;

/** The parameter type of a value to compare with a stored value of each type. */
const SCALAR: Record<AttributeType, PgType> = {
  string: 'text',
  email: 'text',
  number: 'numeric',
  boolean: 'boolean',
  array: 'text',
};

function custom(name: string, type: AttributeType, op: CompareOp, value: Scalar | Scalar[], p: Params): string {
  const key = p.add(name, 'text');
  const stored = `c.attributes -> ${key}`;
  const storedText = `(c.attributes ->> ${key})`;
  // Containment (`@>`) is never NULL and can use an index on attributes; a stored value matches it
  // only with the same JSON type (`{"a": ["x"]}` does not contain `{"a": "x"}`).
  if (op === 'eq' && type !== 'email')
    return `c.attributes @> jsonb_build_object(${key}, ${p.add(value, SCALAR[type])})`;
  if (op === 'contains')
    return `c.attributes @> jsonb_build_object(${key}, jsonb_build_array(${p.add(value, 'text')}))`;
  switch (type) {
    case 'string':
      return whenTyped(stored, 'string', textTest(storedText, op, value, p));
    case 'number':
      return whenTyped(stored, 'number', numberTest(`(${stored})::numeric`, op, value, p));
    case 'email':
      return whenTyped(stored, 'string', emailTest(`lower${storedText}`, op, value, p));
    default:
      // array: containsAny (`?|` on a JSON array matches its string entries)
      return whenTyped(stored, 'array', `${stored} ?| ${p.add(value, 'text[]')}`);
  }
}

/** A derived key's text from the stored address, as src/contacts/email.ts derivedOf computes it. */
const DERIVED: Record<DerivedKey, (lowerText: string) => string> = {
  md5: (t) => `md5(${t})`,
  sha256: (t) => `encode(sha256(convert_to(${t}, 'UTF8')), 'hex')`,
  sha512: (t) => `encode(sha512(convert_to(${t}, 'UTF8')), 'hex')`,
  domain: (t) => `split_part(${t}, '@', -1)`,
};

function derived(name: string, key: DerivedKey, op: CompareOp, value: Scalar | Scalar[], p: Params): string {
  const at = p.add(name, 'text');
  return whenTyped(
    `c.attributes -> ${at}`,
    'string',
    textTest(DERIVED[key](`lower(c.attributes ->> ${at})`), op, value, p),
  );
}

/** Exact, case-sensitive text operators (string attributes and derived keys). */
function textTest(text: string, op: CompareOp, value: Scalar | Scalar[], p: Params): string {
  switch (op) {
    case 'in':
      return `${text} = any(${p.add(value, 'text[]')})`;
    case 'prefix':
      return `starts_with(${text}, ${p.add(value, 'text')})`;
    case 'ne':
      return `${text} <> ${p.add(value, 'text')}`;
    default:
      return `${text} = ${p.add(value, 'text')}`;
  }
}

const NUMBER_OPS: Partial<Record<CompareOp, string>> = { eq: '=', ne: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=' };

function numberTest(num: string, op: CompareOp, value: Scalar | Scalar[], p: Params): string {
  if (op === 'in') return `${num} = any(${p.add(value, 'numeric[]')})`;
  return `${num} ${NUMBER_OPS[op]} ${p.add(value, 'numeric')}`;
}

/** Email attributes compare lowercased: eq, in, and domain (the part after the last `@`). */
function emailTest(lowerText: string, op: CompareOp, value: Scalar | Scalar[], p: Params): string {
  if (op === 'in') return `${lowerText} = any(${p.add(lowered(value), 'text[]')})`;
  if (op === 'domain') return `split_part(${lowerText}, '@', -1) = ${p.add(lowered(value), 'text')}`;
  return `${lowerText} = ${p.add(lowered(value), 'text')}`;
}

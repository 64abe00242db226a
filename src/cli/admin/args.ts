import type { Sql } from '../../db';

/** Bad command line (unknown flag, missing value, invalid value): exit code 2. */
export class UsageError extends Error {}

/** A well-formed command that the stored data refuses (unknown account, duplicate name): exit code 1. */
export class AdminError extends Error {}

/** `string`: at most once; `list`: repeatable, collected in order; `boolean`: present or not, no value. */
export type FlagKind = 'string' | 'list' | 'boolean';
export type FlagSpec = Record<string, { kind: FlagKind; required?: boolean }>;

/** The kinds of flag, spelled once, so a command's spec reads as one line: `{ account: REQUIRED, offer: OPTIONAL }`. */
export const REQUIRED = { kind: 'string', required: true } as const;
export const OPTIONAL = { kind: 'string' } as const;
export const LIST = { kind: 'list' } as const;
export const SWITCH = { kind: 'boolean' } as const;

export type Flags<S extends FlagSpec> = {
  [K in keyof S]: S[K]['kind'] extends 'boolean'
    ? boolean
    : S[K]['kind'] extends 'list'
      ? string[]
      : S[K]['required'] extends true
        ? string
        : string | undefined;
};

/**
 * Parses `--flag value`, `--flag=value` and bare boolean flags against a spec. A value that itself
 * starts with `--` must use the `=` form, so a forgotten value never silently swallows the next flag.
 * @example parseFlags(['--name', 'Acme', '--esp=A', '--esp', 'B'], { name: { kind: 'string' }, esp: { kind: 'list' } })
 */
export function parseFlags<S extends FlagSpec>(argv: readonly string[], spec: S): Flags<S> {
  const out: Record<string, string | string[] | boolean | undefined> = {};
  for (const [name, { kind }] of Object.entries(spec))
    out[name] = kind === 'list' ? [] : kind === 'boolean' ? false : undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--') || arg === '--') throw new UsageError(`unexpected argument "${arg}"`);
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const def = Object.hasOwn(spec, name) ? spec[name] : undefined;
    if (!def) throw new UsageError(`unknown flag --${name}`);
    if (def.kind === 'boolean') {
      if (eq !== -1) throw new UsageError(`--${name} takes no value`);
      out[name] = true;
      continue;
    }
    let value: string;
    if (eq !== -1) value = arg.slice(eq + 1);
    else {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) throw new UsageError(`--${name} needs a value`);
      value = next;
      i++;
    }
    if (def.kind === 'list') (out[name] as string[]).push(value);
    else if (out[name] !== undefined) throw new UsageError(`--${name} given more than once`);
    else out[name] = value;
  }
  for (const [name, def] of Object.entries(spec)) {
    if (def.required && out[name] === undefined) throw new UsageError(`--${name} is required`);
  }
  return out as Flags<S>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A uuid flag value, lowercased: ids are also hashed as text for advisory locks, where the
 * canonical (lowercase) form must match what `account_id::text` gives in SQL.
 */
export function uuidFlag(name: string, value: string): string {
  if (!UUID.test(value)) throw new UsageError(`--${name} must be a uuid, got "${value}"`);
  return value.toLowerCase();
}

// C0 controls, DEL and C1 controls.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** A trimmed, non-empty name of at most `max` characters without control characters. */
export function nameFlag(name: string, value: string, max = 255): string {
  const v = value.trim();
  if (v === '') throw new UsageError(`--${name} must not be empty`);
  if (v.length > max) throw new UsageError(`--${name} must be at most ${max} characters`);
  if (CONTROL.test(v)) throw new UsageError(`--${name} must not contain control characters`);
  return v;
}

/**
 * One admin command. `prepare` parses and validates the flags before any database is touched (so a
 * usage error never starts the embedded PostgreSQL); the function it returns does the work and
 * gives the one JSON object to print.
 */
export interface Command {
  usage: string;
  prepare(argv: readonly string[]): (sql: Sql) => Promise<object>;
}

import { cacheChanged } from '../auth/cache';
import type { Sql } from '../db';
import { withSchemaChangeHold } from '../contacts/write-guard';
import { isObjectInternalName, PREDEFINED, type AttributeType, type SchemaAttribute } from './service';

export const ATTRIBUTE_TYPES: readonly AttributeType[] = ['string', 'email', 'number', 'boolean', 'array'];

/** An attribute of that name already exists in the account (names are unique case-insensitively). */
export class DuplicateAttributeError extends Error {}

/**
 * Why `name` and `type` cannot make a custom attribute, or undefined when they can. `name:sub` keys
 * are derived sub-attributes of email attributes, so a stored name never holds a colon; Email and
 * Brand are predefined and never stored; object-internal names could meet what every object has.
 */
export function attributeProblem(name: string, type: string): string | undefined {
  if (PREDEFINED.some((p) => p.name.toLowerCase() === name.toLowerCase())) return `"${name}" is a predefined attribute`;
  if (isObjectInternalName(name)) {
    return `"${name}" is the name of a JavaScript object internal and cannot be an attribute name`;
  }
  if (name.includes(':')) return `attribute names must not contain ":" (it separates derived keys such as name:md5)`;
  if (!(ATTRIBUTE_TYPES as readonly string[]).includes(type)) {
    return `--type must be one of ${ATTRIBUTE_TYPES.join(', ')}, got "${type}"`;
  }
  return undefined;
}

/**
 * Adds a custom attribute to the account's schema, as a schema change that holds the account's
 * contact writes (src/contacts/write-guard.ts), so no write or merge batch interleaves with it.
 */
export async function createAttribute(sql: Sql, accountId: string, a: SchemaAttribute): Promise<string> {
  try {
    await withSchemaChangeHold(sql, accountId, async (tx) => {
      await tx`
        insert into schema_attributes (account_id, name, type, description)
        values (${accountId}, ${a.name}, ${a.type}, ${a.description ?? null})`;
      await cacheChanged(tx, accountId, 'schema_attributes');
    });
  } catch (err) {
    if ((err as { code?: string }).code === '23505') {
      throw new DuplicateAttributeError(
        `an attribute named "${a.name}" already exists in account ${accountId} (names are unique case-insensitively)`,
      );
    }
    throw err;
  }
  return a.name;
}

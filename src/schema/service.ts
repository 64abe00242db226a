import type { Sql } from '../db';

export type AttributeType = 'string' | 'email' | 'number' | 'boolean' | 'array';

export interface SchemaAttribute {
  name: string;
  type: AttributeType;
  description?: string;
}

/** Every account has these two, first, in this order; they are never stored. */
export const PREDEFINED: readonly SchemaAttribute[] = [
  { name: 'Email', type: 'email' },
  { name: 'Brand', type: 'array' },
];

interface AttributeRow {
  name: string;
  type: AttributeType;
  description: string | null;
}

const toAttribute = (r: AttributeRow): SchemaAttribute => ({
  name: r.name,
  type: r.type,
  ...(r.description !== null && { description: r.description }),
});

/** Custom attributes in creation order. */
/**
 * Names an object already has (`__proto__`, `constructor`, `toString`, …, any case): never an
 * attribute, so such a request key is always an unknown attribute and no lookup or copy of a
 * contact's attributes can meet one as its own.
 */
export function isObjectInternalName(name: string): boolean {
  const lower = name.toLowerCase();
  return (
    lower === '__proto__' ||
    lower === 'prototype' ||
    Object.getOwnPropertyNames(Object.prototype).some((p) => p.toLowerCase() === lower)
  );
}

export async function customAttributes(sql: Sql, accountId: string): Promise<SchemaAttribute[]> {
  const rows = await sql<AttributeRow[]>`
    select name, type, description from schema_attributes where account_id = ${accountId} order by position`;
  return rows.map(toAttribute);
}

/** The schema in schema order: Email, Brand, then custom attributes as created. */
export async function getSchema(sql: Sql, accountId: string): Promise<SchemaAttribute[]> {
  return [...PREDEFINED, ...(await customAttributes(sql, accountId))];
}

export interface VersionedAttributes {
  /** cache_versions.schema of the account (sql/migrations/0002_cache_invalidation.sql). */
  version: number;
  attributes: SchemaAttribute[];
}

/**
 * Custom attributes and the schema version they are at, read in one snapshot: a statement that
 * later finds the same version knows these are still the account's attributes.
 */
export async function versionedAttributes(sql: Sql, accountId: string): Promise<VersionedAttributes> {
  const [row] = await sql<{ version: number; attributes: AttributeRow[] }[]>`
    select coalesce((select schema from cache_versions where account_id = ${accountId}), 0) as version,
           (select coalesce(json_agg(json_build_object('name', s.name, 'type', s.type, 'description', s.description)
                                     order by s.position), '[]'::json)
            from schema_attributes s where s.account_id = ${accountId}) as attributes`;
  return { version: row!.version, attributes: row!.attributes.map(toAttribute) };
}

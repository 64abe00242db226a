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

/** Custom attributes in creation order. */
export async function customAttributes(sql: Sql, accountId: string): Promise<SchemaAttribute[]> {
  const rows = await sql<{ name: string; type: AttributeType; description: string | null }[]>`
    select name, type, description from schema_attributes where account_id = ${accountId} order by position`;
  return rows.map((r) => ({ name: r.name, type: r.type, ...(r.description !== null && { description: r.description }) }));
}

/** The schema in schema order: Email, Brand, then custom attributes as created. */
export async function getSchema(sql: Sql, accountId: string): Promise<SchemaAttribute[]> {
  return [...PREDEFINED, ...(await customAttributes(sql, accountId))];
}

import type { Sql, Tx } from '../db';
import { invalidField, notFound } from '../errors';
import { customAttributes } from '../schema/service';
import { AttributeSchema } from './attributes';
import { md5ToUuid, uuidToMd5 } from './email';
import type { ContactBody } from './model';
import { brandSubscribeEvents, contactColumns, liveBrandsAmong, type ContactRow } from './write-sql';

export type { ContactRow } from './write-sql';

export async function schemaOf(sql: Sql | Tx, accountId: string): Promise<AttributeSchema> {
  return new AttributeSchema(await customAttributes(sql as Sql, accountId));
}

export function toContact(row: ContactRow, schema: AttributeSchema): ContactBody {
  return {
    email: row.email,
    emailMd5: uuidToMd5(row.email_md5),
    attributes: schema.render(row.attributes),
    brandIds: row.brand_ids,
    enabled: row.enabled,
    createdAt: row.created_at.toISOString(),
  };
}

/** The contact addressed by a path `emailMd5` (any case), or undefined. */
export async function findContact(
  sql: Sql | Tx,
  accountId: string,
  emailMd5: string,
  lock = false,
): Promise<ContactRow | undefined> {
  const [row] = await sql<ContactRow[]>`
    select ${contactColumns(sql)} from contacts
    where account_id = ${accountId} and email_md5 = ${md5ToUuid(emailMd5)}
    ${lock ? sql`for update` : sql``}`;
  return row;
}

export async function requireContact(
  sql: Sql | Tx,
  accountId: string,
  emailMd5: string,
  lock = false,
): Promise<ContactRow> {
  const row = await findContact(sql, accountId, emailMd5, lock);
  if (!row) throw notFound(`No contact with emailMd5 ${emailMd5.toLowerCase()} in this account.`);
  return row;
}

/** Lowercased, without repeats, in the order sent. */
export const distinctIds = (ids: readonly string[]) => [...new Set(ids.map((id) => id.toLowerCase()))];

/** Ids that are not live brands of the account (deleted brands and other accounts' ids included). */
export async function unknownBrandIds(sql: Sql | Tx, accountId: string, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await sql<{ id: string }[]>`select id from brands where ${liveBrandsAmong(sql, accountId, ids)}`;
  const live = new Set(rows.map((r) => r.id));
  return ids.filter((id) => !live.has(id.toLowerCase()));
}

/** 400 with pointer `/brandIds` unless every id is a live brand of the account. */
export async function assertBrandIds(sql: Sql | Tx, accountId: string, ids: readonly string[]): Promise<void> {
  const unknown = await unknownBrandIds(sql, accountId, ids);
  if (unknown.length) throw invalidField('/brandIds', `Not a brand in this account: ${unknown.join(', ')}.`);
}

/** The brand-subscribe events of brands newly assigned to one contact, in the caller's transaction. */
export async function recordBrandSubscribeEvents(
  tx: Tx,
  accountId: string,
  emailMd5Uuid: string,
  brandIds: readonly string[],
): Promise<void> {
  if (brandIds.length) await brandSubscribeEvents(tx, accountId, emailMd5Uuid, brandIds);
}

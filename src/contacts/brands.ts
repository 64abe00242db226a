import type { Sql, Tx } from '../db';
import { invalidParameter } from '../errors';
import { md5ToUuid } from './email';
import { unionOf } from './merge';
import { assertBrandIds, distinctIds, recordBrandSubscribeEvents, requireContact, unknownBrandIds } from './store';
import { withContactWrite } from './write-guard';

export interface ContactBrandList {
  brands: { id: string; name: string }[];
}

/** The contact's brands in assignment order; deleted brands keep their name. */
async function brandsOf(sql: Sql | Tx, accountId: string, brandIds: readonly string[]): Promise<ContactBrandList> {
  if (brandIds.length === 0) return { brands: [] };
  const brands = await sql<{ id: string; name: string }[]>`
    select b.id, b.name
    from unnest(${sql.array([...brandIds])}::uuid[]) with ordinality as u(id, n)
    join brands b on b.account_id = ${accountId} and b.id = u.id
    order by u.n`;
  return { brands };
}

export async function listContactBrands(sql: Sql, accountId: string, md5: string): Promise<ContactBrandList> {
  const contact = await requireContact(sql, accountId, md5);
  return brandsOf(sql, accountId, contact.brand_ids);
}

/**
 * Adds the brands the contact does not have yet. The row lock serialises concurrent additions, so
 * none is lost and each new brand gets exactly one event.
 */
export async function addContactBrands(
  sql: Sql,
  accountId: string,
  md5: string,
  sent: readonly string[],
  publish: boolean,
): Promise<ContactBrandList> {
  await requireContact(sql, accountId, md5);
  const ids = distinctIds(sent);
  await assertBrandIds(sql, accountId, ids);
  return withContactWrite(sql, accountId, async (tx) => {
    const contact = await requireContact(tx, accountId, md5, true);
    const added = ids.filter((id) => !contact.brand_ids.includes(id));
    if (added.length === 0) return brandsOf(tx, accountId, contact.brand_ids);
    const next = unionOf(contact.brand_ids, added);
    await tx`update contacts set brand_ids = ${tx.array(next)}::uuid[], updated_at = now()
             where account_id = ${accountId} and email_md5 = ${md5ToUuid(md5)}`;
    if (publish) await recordBrandSubscribeEvents(tx, accountId, md5ToUuid(md5), added);
    return brandsOf(tx, accountId, next);
  });
}

/** Removes one live brand the contact is assigned to (404 contact → 400 brand → 400 assignment → 409). */
export async function removeContactBrand(sql: Sql, accountId: string, md5: string, brandId: string): Promise<void> {
  const id = brandId.toLowerCase();
  const contact = await requireContact(sql, accountId, md5);
  if ((await unknownBrandIds(sql, accountId, [id])).length)
    throw invalidParameter('brandId', `Not a brand in this account: ${brandId}.`);
  const notAssigned = () => invalidParameter('brandId', `The contact is not assigned to brand ${brandId}.`);
  if (!contact.brand_ids.includes(id)) throw notAssigned();
  await withContactWrite(sql, accountId, async (tx) => {
    const locked = await requireContact(tx, accountId, md5, true);
    // A concurrent removal may have won between the check above and the lock.
    if (!locked.brand_ids.includes(id)) throw notAssigned();
    await tx`update contacts set brand_ids = array_remove(brand_ids, ${id}::uuid), updated_at = now()
             where account_id = ${accountId} and email_md5 = ${md5ToUuid(md5)}`;
  });
}

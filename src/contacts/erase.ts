import type { Sql } from '../db';
import { invalidField, notFound } from '../errors';
import { eraseFromEvents, type ErasedContact } from '../events/erase';
import { md5ToUuid } from './email';
import { requireContact } from './store';
import { withContactWrite } from './write-guard';

/** What an erasure was asked for by: the account and the API key (the operator's record). */
export interface Erasing {
  accountId: string;
  keyId: string;
}

/**
 * Erases contacts, the right to be forgotten: in one transaction under the contact-write guard,
 * their rows go (address, attributes, brand assignments, hidden fields), their addresses leave the
 * recorded events, and each erasure is recorded in contact_erasures without the address. Returns
 * the md5s (uuid form) of the contacts that existed. A later create makes a new contact.
 */
async function erase(sql: Sql, { accountId, keyId }: Erasing, keys: readonly string[]): Promise<string[]> {
  return withContactWrite(sql, accountId, async (tx) => {
    const erased = await tx<ErasedContact[]>`
      delete from contacts
      where account_id = ${accountId} and email_md5 = any(${tx.array([...keys])}::uuid[])
      returning email_md5, created_at, updated_at`;
    if (erased.length === 0) return [];
    await eraseFromEvents(tx, accountId, erased);
    await tx`
      insert into contact_erasures (account_id, email_md5, key_id)
      select ${accountId}::uuid, m, ${keyId}::uuid from unnest(${tx.array(erased.map((c) => c.email_md5))}::uuid[]) m`;
    return erased.map((c) => c.email_md5);
  });
}

/** DELETE /v1/contacts/{emailMd5}: 404 when there is no such contact (checked before the guard's 409, as PATCH). */
export async function eraseContact(sql: Sql, erasing: Erasing, md5: string): Promise<void> {
  await requireContact(sql, erasing.accountId, md5);
  const [erased] = await erase(sql, erasing, [md5ToUuid(md5)]);
  // Erased by another request between the check and the lock.
  if (!erased) throw notFound(`No contact with emailMd5 ${md5.toLowerCase()} in this account.`);
}

/**
 * POST /v1/contact-erasures: every md5 well formed (the body's schema) and none a repeat of an
 * earlier one, case-insensitively, or nothing is erased.
 */
export async function eraseContacts(
  sql: Sql,
  erasing: Erasing,
  md5s: readonly string[],
): Promise<{ erasedCount: number; notFoundCount: number }> {
  const seen = new Map<string, number>();
  md5s.forEach((md5, i) => {
    const first = seen.get(md5.toLowerCase());
    if (first !== undefined)
      throw invalidField(`/emailMd5s/${i}`, `emailMd5s[${i}] repeats emailMd5s[${first}]; each contact once.`);
    seen.set(md5.toLowerCase(), i);
  });
  const erased = await erase(sql, erasing, md5s.map(md5ToUuid));
  return { erasedCount: erased.length, notFoundCount: md5s.length - erased.length };
}

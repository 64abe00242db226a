import type { Sql } from '../db';
import { contactExists, notFound } from '../errors';
import { storedAttributes } from './attributes';
import { readCreateRequest } from './create-request';
import { md5ToUuid } from './email';
import { mergeInto } from './merge';
import type { ContactBody, CreateContactInput } from './model';
import {
  assertBrandIds,
  recordBrandSubscribeEvents,
  requireContact,
  schemaOf,
  toContact,
  type ContactRow,
} from './store';
import { withContactWrite } from './write-guard';
import { contactColumns, insertContact, ownFirstAttempt, patchedAttributes, seedAddressOf } from './write-sql';

export async function getContact(sql: Sql, accountId: string, md5: string): Promise<ContactBody> {
  const [row, schema] = await Promise.all([requireContact(sql, accountId, md5), schemaOf(sql, accountId)]);
  return toContact(row, schema);
}

/**
 * POST /v1/contacts. Checks in the order of DESIGN.md: request shape, then stored data (schema,
 * brands), then conflicts inside the write transaction (bulk operation, seed, existing contact).
 */
export async function createContact(
  sql: Sql,
  accountId: string,
  body: CreateContactInput,
  opts: { resentAfterMs?: number } = {},
): Promise<{ created: boolean; contact: ContactBody }> {
  const { email, key, brandIds, publish } = readCreateRequest(body);
  const schema = await schemaOf(sql, accountId);
  const { set: attributes } = schema.read(body.attributes ?? {}, 'create');
  await assertBrandIds(sql, accountId, brandIds ?? []);

  return withContactWrite(sql, accountId, async (tx) => {
    const [seed] = await tx`select 1 from seed_addresses where ${seedAddressOf(tx, accountId, key)}`;
    if (seed) throw contactExists('This email belongs to a seed address of the account.');

    // Of parallel creates exactly one inserts; the others fall through to the locked merge below.
    const [inserted] = await insertContact(tx, accountId, { email, key, attributes, brandIds: brandIds ?? [] });
    if (inserted) {
      if (publish) await recordBrandSubscribeEvents(tx, accountId, key, brandIds ?? []);
      return { created: true, contact: toContact(inserted, schema) };
    }

    const [stored] = await tx<ContactRow[]>`
      select ${contactColumns(tx)} from contacts where account_id = ${accountId} and email_md5 = ${key} for update`;
    // A create sent again after its session was lost (src/http/lost-session.ts) that meets the contact
    // its own first attempt made, committed before the session ended: answered as that attempt would be.
    if (opts.resentAfterMs !== undefined) {
      const [own] = await ownFirstAttempt(
        tx,
        accountId,
        key,
        { attributes, brandIds: brandIds ?? [] },
        opts.resentAfterMs,
      );
      if (own) return { created: true, contact: toContact(stored!, schema) };
    }
    const outcome = mergeInto(
      { attributes: storedAttributes(stored!.attributes), brandIds: stored!.brand_ids, enabled: stored!.enabled },
      {
        attributes,
        brandIds,
        strategy: body.duplicateContactStrategy,
        overwriteBrands: body.overwriteBrands === true,
        restoreDisabled: body.restoreDisabled === true,
      },
    );
    if (outcome.kind === 'conflict') throw contactExists(outcome.detail);
    if (outcome.kind === 'unchanged') return { created: false, contact: toContact(stored!, schema) };
    const { next, addedBrandIds } = outcome;
    const [updated] = await tx<ContactRow[]>`
      update contacts
      set attributes = ${tx.json(next.attributes)}, brand_ids = ${tx.array(next.brandIds)}::uuid[],
          enabled = ${next.enabled}, updated_at = now()
      where account_id = ${accountId} and email_md5 = ${key}
      returning ${contactColumns(tx)}`;
    if (publish) await recordBrandSubscribeEvents(tx, accountId, key, addedBrandIds);
    return { created: false, contact: toContact(updated!, schema) };
  });
}

/** PATCH: the merge patch of patchedAttributes, in one UPDATE. */
export async function patchContact(
  sql: Sql,
  accountId: string,
  md5: string,
  input: Record<string, unknown>,
): Promise<ContactBody> {
  await requireContact(sql, accountId, md5);
  const schema = await schemaOf(sql, accountId);
  const changes = schema.read(input, 'patch');
  return withContactWrite(sql, accountId, async (tx) => {
    const [row] = await tx<ContactRow[]>`
      update contacts
      set attributes = ${patchedAttributes(tx, changes)}, updated_at = now()
      where account_id = ${accountId} and email_md5 = ${md5ToUuid(md5)}
      returning ${contactColumns(tx)}`;
    if (!row) throw notFound(`No contact with emailMd5 ${md5.toLowerCase()} in this account.`);
    return toContact(row, schema);
  });
}

/** Idempotent: disabling a disabled contact changes nothing and returns it. */
export async function disableContact(sql: Sql, accountId: string, md5: string): Promise<ContactBody> {
  await requireContact(sql, accountId, md5);
  const schema = await schemaOf(sql, accountId);
  return withContactWrite(sql, accountId, async (tx) => {
    // Only an enabled contact is written (and its updated_at moved); a disabled one is read as it is.
    // Two statements, not `updated_at = case when enabled then now() …`: Citus refuses now() in a CASE.
    const where = tx`where account_id = ${accountId} and email_md5 = ${md5ToUuid(md5)}`;
    const [disabled] = await tx<ContactRow[]>`
      update contacts set enabled = false, updated_at = now() ${where} and enabled
      returning ${contactColumns(tx)}`;
    const [row] = disabled ? [disabled] : await tx<ContactRow[]>`select ${contactColumns(tx)} from contacts ${where}`;
    if (!row) throw notFound(`No contact with emailMd5 ${md5.toLowerCase()} in this account.`);
    return toContact(row, schema);
  });
}

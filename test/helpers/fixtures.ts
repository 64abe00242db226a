import type { Sql } from '../../src/db';
import { cacheChanged } from '../../src/auth/cache';
import { newKey, parseKey } from '../../src/auth/keys';
import { ALL_SCOPES } from '../../src/auth/scopes';

/** Direct-SQL fixtures: the test subject is the HTTP API, not the admin CLI. */
export async function createAccount(sql: Sql, name = 'Test account'): Promise<string> {
  const [row] = await sql<{ id: string }[]>`insert into accounts (name) values (${name}) returning id`;
  return row!.id;
}

export async function createKey(sql: Sql, accountId: string, scopes: readonly string[] = ALL_SCOPES): Promise<string> {
  const k = newKey();
  await sql.begin(async (tx) => {
    await tx`
      insert into api_keys (account_id, id, secret_sha256, scopes)
      values (${accountId}, ${k.id}, ${k.secretSha256}, ${tx.array([...scopes])})`;
    await cacheChanged(tx, accountId, 'api_keys', k.id);
  });
  return k.key;
}

/** Revokes a key (ck_<id>_<secret>) as the admin CLI does: with cache_changed in its transaction. */
export async function revokeKey(sql: Sql, key: string): Promise<void> {
  const id = parseKey(key)!.id;
  await sql.begin(async (tx) => {
    const [row] = await tx<{ account_id: string }[]>`
      update api_keys set revoked_at = now() where id = ${id} returning account_id`;
    await cacheChanged(tx, row!.account_id, 'api_keys', id);
  });
}

/** Suspends an account as the admin CLI does: with cache_changed in its transaction. */
export async function suspendAccount(sql: Sql, accountId: string): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`update accounts set suspended_at = now() where id = ${accountId}`;
    await cacheChanged(tx, accountId, 'accounts');
  });
}

export async function createBrand(
  sql: Sql,
  accountId: string,
  name: string,
  extra: { enabled?: boolean; fromAddress?: string; domain?: string } = {},
): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into brands (account_id, name, enabled, from_address, domain)
    values (${accountId}, ${name}, ${extra.enabled ?? true}, ${extra.fromAddress ?? null}, ${extra.domain ?? null})
    returning id`;
  return row!.id;
}

export async function createAttribute(
  sql: Sql,
  accountId: string,
  name: string,
  type: string,
  description?: string,
): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`
      insert into schema_attributes (account_id, name, type, description)
      values (${accountId}, ${name}, ${type}, ${description ?? null})`;
    await cacheChanged(tx, accountId, 'schema_attributes');
  });
}

export async function createSuppressionList(
  sql: Sql,
  accountId: string,
  name: string,
  format: 'plain text' | 'md5' | 'sha512',
  extra: { isGlobal?: boolean; offerId?: string } = {},
): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into suppression_lists (account_id, name, format, is_global, offer_id)
    values (${accountId}, ${name}, ${format}, ${extra.isGlobal ?? false}, ${extra.offerId ?? null})
    returning id`;
  return row!.id;
}

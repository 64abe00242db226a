import { cacheChanged } from '../../auth/cache';
import { newKey } from '../../auth/keys';
import { ALL_SCOPES, isScope, type Scope } from '../../auth/scopes';
import type { Sql, Tx } from '../../db';
import { requireAccount } from './accounts';
import { AdminError, type Command, OPTIONAL, parseFlags, REQUIRED, UsageError, uuidFlag } from './args';

export interface CreatedKey {
  id: string;
  /** Shown once: only the SHA-256 of its secret is stored. */
  key: string;
  scopes: Scope[];
}

export async function createKey(sql: Sql | Tx, accountId: string, scopes: readonly Scope[] = ALL_SCOPES) {
  const { id, key, secretSha256 } = newKey();
  const insert = async (tx: Tx) => {
    await tx`
      insert into api_keys (account_id, id, secret_sha256, scopes)
      values (${accountId}, ${id}, ${secretSha256}, ${tx.array([...scopes])})`;
    await cacheChanged(tx, accountId, 'api_keys', id);
  };
  await ('begin' in sql ? sql.begin(insert) : insert(sql));
  return { id, key, scopes: [...scopes] } satisfies CreatedKey;
}

/** `a,b` (spaces and repeats tolerated); unknown scopes are refused with the valid list. */
function parseScopes(value: string | undefined): Scope[] {
  if (value === undefined) return [...ALL_SCOPES];
  const parts = [
    ...new Set(
      value
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    ),
  ];
  if (parts.length === 0) throw new UsageError('--scopes must name at least one scope');
  const unknown = parts.filter((s) => !isScope(s));
  if (unknown.length > 0)
    throw new UsageError(`unknown scope ${unknown.join(', ')}; valid scopes: ${ALL_SCOPES.join(', ')}`);
  return parts as Scope[];
}

export const keyCommands: Record<string, Command> = {
  'key create': {
    usage: 'key create --account ID [--scopes s1,s2]',
    prepare(argv) {
      const flags = parseFlags(argv, { account: REQUIRED, scopes: OPTIONAL });
      const accountId = uuidFlag('account', flags.account);
      const scopes = parseScopes(flags.scopes);
      return async (sql) => {
        await requireAccount(sql, accountId);
        return createKey(sql, accountId, scopes);
      };
    },
  },
  'key revoke': {
    usage: 'key revoke --key-id ID [--account ID]',
    prepare(argv) {
      const flags = parseFlags(argv, { 'key-id': REQUIRED, account: OPTIONAL });
      const keyId = uuidFlag('key-id', flags['key-id']);
      const accountId = flags.account === undefined ? undefined : uuidFlag('account', flags.account);
      return async (sql) => {
        if (accountId) await requireAccount(sql, accountId);
        // Revoking again keeps the first revocation time.
        const revoked = await sql.begin(async (tx) => {
          const [row] = await tx<{ account_id: string }[]>`
            update api_keys set revoked_at = least(revoked_at, now())
            where id = ${keyId} ${accountId ? tx`and account_id = ${accountId}` : tx``}
            returning account_id`;
          if (row) await cacheChanged(tx, row.account_id, 'api_keys', keyId);
          return row !== undefined;
        });
        if (!revoked) throw new AdminError(`no key ${keyId}${accountId ? ` in account ${accountId}` : ''}`);
        return { id: keyId, revoked: true };
      };
    },
  },
  'key list': {
    usage: 'key list --account ID',
    prepare(argv) {
      const accountId = uuidFlag('account', parseFlags(argv, { account: REQUIRED }).account);
      return async (sql) => {
        await requireAccount(sql, accountId);
        const rows = await sql<{ id: string; scopes: string[]; created_at: Date; revoked_at: Date | null }[]>`
          select id, scopes, created_at, revoked_at from api_keys
          where account_id = ${accountId} order by created_at, id`;
        return {
          keys: rows.map((r) => ({
            id: r.id,
            scopes: r.scopes,
            createdAt: r.created_at.toISOString(),
            ...(r.revoked_at !== null && { revokedAt: r.revoked_at.toISOString() }),
          })),
        };
      };
    },
  },
};

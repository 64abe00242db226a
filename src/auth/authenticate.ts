import type { Sql } from '../db';
import { forbidden, unauthenticated } from '../errors';
import { parseKey, secretMatches } from './keys';
import type { Scope } from './scopes';

export interface Auth {
  readonly accountId: string;
  readonly keyId: string;
  readonly scopes: readonly string[];
}

// Hashing a wrong secret against a dummy keeps the timing of unknown ids like that of wrong secrets.
const DUMMY_HASH = Buffer.alloc(32);

/** Resolves the Authorization header to an account, or throws 401/403 problems. */
export async function authenticate(sql: Sql, header: string | null, scope: Scope | undefined): Promise<Auth> {
  const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  if (!match) throw unauthenticated();
  const parsed = parseKey(match[1]!);
  if (!parsed) throw unauthenticated('The API key is not valid.');
  const [row] = await sql<{ account_id: string; secret_sha256: Buffer; scopes: string[]; revoked: boolean; suspended: boolean }[]>`
    select k.account_id, k.secret_sha256, k.scopes, k.revoked_at is not null as revoked, a.suspended_at is not null as suspended
    from api_keys k join accounts a on a.id = k.account_id
    where k.id = ${parsed.id}`;
  const matches = secretMatches(parsed.secret, row?.secret_sha256 ?? DUMMY_HASH);
  if (!row || !matches || row.revoked) throw unauthenticated('The API key is not valid.');
  if (row.suspended) throw forbidden('The account of this API key is suspended.');
  if (scope && !row.scopes.includes(scope)) throw forbidden(`The API key lacks the ${scope} scope.`);
  return { accountId: row.account_id, keyId: parsed.id, scopes: row.scopes };
}

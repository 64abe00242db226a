import type { Sql } from '../db';
import { forbidden, unauthenticated } from '../errors';
import { LiveCache } from './cache';
import { parseKey, secretMatches } from './keys';
import type { Scope } from './scopes';
import { suspendedSql } from './suspension';

export interface Auth {
  readonly accountId: string;
  readonly keyId: string;
  readonly scopes: readonly string[];
}

/**
 * A key as read at a version of its account's keys (cache_versions.keys, which every change of the
 * account or of any of its keys moves in the same transaction). A statement that finds the version
 * unchanged knows, in its own snapshot, that the key is still exactly as read: valid, with these
 * scopes, account not suspended. Claims come from the cache (unconfirmed in this request) or from a
 * fresh authentication.
 */
export interface KeyClaim {
  readonly auth: Auth;
  readonly keysVersion: number;
  /** The account's own rate limit (migration 0014), or null: the API's defaults (src/ratelimit). */
  readonly rateLimit: AccountRateLimit | null;
}

export interface AccountRateLimit {
  readonly perSecond: number;
  readonly burst: number;
}

export interface KeyRow {
  account_id: string;
  secret_sha256: Buffer;
  scopes: string[];
  revoked: boolean;
  suspended: boolean;
  keys_version: number;
  rate_limit_per_second: number | null;
  rate_limit_burst: number | null;
}

// Hashing a wrong secret against a dummy keeps the timing of unknown ids like that of wrong secrets.
const DUMMY_HASH = Buffer.alloc(32);

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** Resolves Authorization headers to accounts: from the database, or as a claim from the key cache. */
export class Authenticator {
  constructor(
    private readonly sql: Sql,
    readonly keys: LiveCache<KeyRow> = new LiveCache(),
  ) {}

  /** Reads the key afresh (and refreshes the cache), or throws 401/403 problems. */
  async authenticate(header: string | null, scope: Scope | undefined): Promise<KeyClaim> {
    const match = header ? BEARER.exec(header) : null;
    if (!match) throw unauthenticated();
    const parsed = parseKey(match[1]!);
    if (!parsed) throw unauthenticated('The API key is not valid.');
    const epoch = this.keys.epoch;
    const [row] = await this.sql<KeyRow[]>`
      select k.account_id, k.secret_sha256, k.scopes, k.revoked_at is not null as revoked,
             ${suspendedSql(this.sql, 'a')} as suspended,
             coalesce(v.keys, 0) as keys_version, a.rate_limit_per_second, a.rate_limit_burst
      from api_keys k join accounts a on a.id = k.account_id left join cache_versions v on v.account_id = k.account_id
      where k.id = ${parsed.id}`;
    const matches = secretMatches(parsed.secret, row?.secret_sha256 ?? DUMMY_HASH);
    if (row) this.keys.set(parsed.id, row, epoch, row.account_id);
    if (!row || !matches || row.revoked) throw unauthenticated('The API key is not valid.');
    if (row.suspended) throw forbidden('The account of this API key is suspended.');
    if (scope && !row.scopes.includes(scope)) throw forbidden(`The API key lacks the ${scope} scope.`);
    return claimOf(parsed.id, row);
  }

  /**
   * A claim when the cache holds the key as valid, unsuspended and with the scope, and the secret
   * matches; otherwise undefined (the caller authenticates). Never refuses anything by itself: the
   * claim is only as good as the version check of the statement that uses it.
   */
  claim(header: string | null, scope: Scope): KeyClaim | undefined {
    const match = header ? BEARER.exec(header) : null;
    const parsed = match ? parseKey(match[1]!) : undefined;
    const row = parsed && this.keys.get(parsed.id);
    if (!parsed || !row || row.revoked || row.suspended || !row.scopes.includes(scope)) return undefined;
    if (!secretMatches(parsed.secret, row.secret_sha256)) return undefined;
    return claimOf(parsed.id, row);
  }
}

function claimOf(keyId: string, row: KeyRow): KeyClaim {
  const perSecond = row.rate_limit_per_second;
  const burst = row.rate_limit_burst;
  return {
    auth: { accountId: row.account_id, keyId, scopes: row.scopes },
    keysVersion: row.keys_version,
    rateLimit: perSecond !== null && burst !== null ? { perSecond, burst } : null,
  };
}

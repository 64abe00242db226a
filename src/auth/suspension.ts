import type { AnySql } from '../db';

/**
 * What suspending an account stops (docs/admin-cli.md, account suspend): every API key of the
 * account, and everything it was given before or started before, wherever it is served or run —
 * download links, upload links, imports, exports, webhook deliveries. An account is suspended while
 * accounts.suspended_at is set (`account suspend` sets it, `account unsuspend` clears it, both with
 * cache_changed in their transaction, so cached keys are not trusted past the commit).
 *
 * This file is the one spelling of that rule: every statement that asks uses `suspendedSql`, every
 * check of one account uses `isSuspended`. They read the row afresh, never a cache: a suspension
 * holds from its commit on, in every API and worker process, and these checks run once per link use
 * or unit of work, not per contact.
 */
export function suspendedSql(sql: AnySql, accountsAlias: string) {
  return sql`${sql(accountsAlias)}.suspended_at is not null`;
}

/** Whether the account is suspended now; an account that does not exist is not (its work finds nothing). */
export async function isSuspended(sql: AnySql, accountId: string): Promise<boolean> {
  const [row] = await sql<{ suspended: boolean }[]>`
    select ${suspendedSql(sql, 'a')} as suspended from accounts a where a.id = ${accountId}`;
  return row?.suspended ?? false;
}

/** The refusal's wording, shared by the API's envelope and the upload link's XML. */
export const SUSPENDED_DETAIL = 'The account is suspended.';

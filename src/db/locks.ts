import type postgres from 'postgres';
import type { AnySql } from './pool';

/**
 * Every PostgreSQL advisory lock key the service takes, spelled once. Each is a SQL fragment for
 * `pg_advisory_*lock*(…)`; a key is a bigint hashed from text, and the text's prefix keeps each kind
 * of lock in a key space of its own.
 *
 * Advisory locks are per node. The worker process's own (an import's run, its merges, the staging
 * pool) are taken where every worker process connects, the coordinator on Citus. The locks of an
 * account's resources that API replicas take (which may connect to any node, docs/scaling-out.md)
 * go through `accountXactLock`, which takes them on the node of the account's shards.
 *
 * Not here: the account's contact-write lock, whose key (the account id alone, hashed) is taken only
 * inside the database functions contact_write_lock and account_bulk_lock (sql/migrations), so that
 * on Citus it is taken on the node of the account's shards (src/contacts/write-guard.ts).
 */
type Fragment = postgres.Fragment;

const hashed = (sql: AnySql, text: string): Fragment => sql`hashtextextended(${text}, 0)`;

/** One contact import's run: a second delivery of its job cannot run it at the same time. */
export const importRunLock = (sql: AnySql, importId: string) => hashed(sql, `contact-import:${importId.toLowerCase()}`);

/** An account's merges: two imports of one account never merge at once. */
export const accountMergeLock = (sql: AnySql, accountId: string) =>
  hashed(sql, `contact-merge:${accountId.toLowerCase()}`);

/** One merge batch's transaction, from its first seq: the next batch waits on it before it commits. */
export const mergeBatchLock = (sql: AnySql, importId: string, lo: number) =>
  hashed(sql, `contact-merge-batch:${importId.toLowerCase()}:${lo}`);

/**
 * Takes `lock`, a lock of one of `accountId`'s resources, for the caller's transaction, on the node
 * of the account's shards (sql/migrations/0016_account_locks.sql).
 */
export async function accountXactLock(sql: AnySql, accountId: string, lock: Fragment): Promise<void> {
  await sql`select account_xact_lock(${accountId}::uuid, ${lock})`;
}

/** accountXactLock if the lock is free: whether it was (and is now the caller's), never waiting. */
export async function tryAccountXactLock(sql: AnySql, accountId: string, lock: Fragment): Promise<boolean> {
  const [row] = await sql<{ locked: boolean }[]>`select account_try_xact_lock(${accountId}::uuid, ${lock}) as locked`;
  return row!.locked;
}

/** An account's webhook endpoints: creates count them one after the other. */
export const webhookEndpointsLock = (sql: AnySql, accountId: string) => hashed(sql, `webhook-endpoints:${accountId}`);

/** A suppression list: one import at a time. */
export const suppressionListLock = (sql: AnySql, accountId: string, listId: string) =>
  hashed(sql, `suppression-list:${accountId}:${listId}`);

/** The staging pool's upkeep (worker/import/staging-pool.ts): one process at a time makes and drops sets. */
export const stagingPoolLock = (sql: AnySql) => hashed(sql, 'staging-pool');

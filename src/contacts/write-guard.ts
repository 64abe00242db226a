import type { Sql, Tx } from '../db';
import { operationInProgress } from '../errors';

const WHAT: Record<string, string> = {
  'contact-import': 'A bulk contact import is writing this account’s contacts',
  'schema-change': 'A contact schema change is running on this account',
};

/**
 * Runs one single-contact write in a transaction that cannot interleave with a bulk operation.
 *
 * The write holds the account's advisory lock SHARED for its whole transaction; the bulk side
 * first commits a `bulk_operations` row, then takes the same lock EXCLUSIVE: `attribute create` for
 * its one change; an import once, before its first merge batch (a drain: it waits for every write
 * that passed its check before the row existed), its batches then holding it shared. So a write
 * either finished before the bulk operation started, or sees the row here and is refused with 409
 * `operation_in_progress` and an honest `Retry-After` (estimated end, at least 1 second). Single
 * writes never block each other on this lock.
 *
 * @example await withContactWrite(sql, accountId, (tx) => tx`update contacts set … where …`)
 */
export async function withContactWrite<T>(sql: Sql, accountId: string, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const result = await sql.begin(async (tx) => {
    // Checked before the lock too: a write arriving while the lock is held exclusive (a schema
    // change, an import's drain) is refused at once instead of waiting only to be refused then.
    await refuseDuringBulkOperation(tx, accountId);
    await tx`select pg_advisory_xact_lock_shared(hashtextextended(${accountId}::uuid::text, 0))`;
    await refuseDuringBulkOperation(tx, accountId);
    return fn(tx);
  });
  return result as T;
}

async function refuseDuringBulkOperation(tx: Tx, accountId: string): Promise<void> {
  const [op] = await tx<{ kind: string; seconds: number }[]>`
    select kind, ceil(extract(epoch from estimated_end - clock_timestamp()))::int as seconds
    from bulk_operations
    where account_id = ${accountId}
    order by estimated_end desc
    limit 1`;
  if (!op) return;
  const seconds = Math.max(1, op.seconds);
  throw operationInProgress(
    `${WHAT[op.kind] ?? 'A bulk contact operation is running'}; single contact writes are held until it ends. Retry in about ${seconds} s.`,
    seconds,
  );
}

import type { Sql, Tx } from '../db';
import { operationInProgress } from '../errors';
import { mergeRetryAfterSeconds } from '../imports/retry-after';

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
 * `operation_in_progress` and an honest `Retry-After` (see retryAfter below). Single writes never
 * block each other on this lock.
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

interface BulkOperation {
  kind: string;
  /** seconds until estimated_end; negative once it has passed */
  ahead: number;
  /** the import's row, for a contact import (null for a schema change) */
  quiet: number | null;
  active: number | null;
  checkpoint: number | null;
  row_count: number | null;
}

/**
 * Seconds until the bulk operation ends. A merge moves its estimated end with every batch, but a
 * merge whose worker was killed moves nothing: its passed estimate would say 1 s for as long as
 * the job waits to be picked up again, and then for the rest of the merge. So a contact import's
 * answer comes from its progress (src/imports/retry-after.ts, mergeRetryAfterSeconds); a schema
 * change (the admin CLI, one statement) keeps its own estimate.
 */
function retryAfter(op: BulkOperation): number {
  if (op.kind === 'contact-import' && op.quiet !== null && op.active !== null && op.checkpoint !== null && op.row_count !== null) {
    return mergeRetryAfterSeconds({ secondsToEstimate: op.ahead, quietSeconds: op.quiet, activeSeconds: op.active, checkpoint: op.checkpoint, rowCount: op.row_count });
  }
  return Math.max(1, Math.ceil(op.ahead));
}

async function refuseDuringBulkOperation(tx: Tx, accountId: string): Promise<void> {
  const [op] = await tx<BulkOperation[]>`
    select b.kind,
           extract(epoch from b.estimated_end - clock_timestamp())::float8 as ahead,
           extract(epoch from clock_timestamp() - i.updated_at)::float8 as quiet,
           extract(epoch from i.updated_at - b.started_at)::float8 as active,
           i.checkpoint::float8 as checkpoint, i.row_count::float8 as row_count
    from bulk_operations b
    left join contact_imports i on b.kind = 'contact-import' and i.account_id = b.account_id and i.id = b.id
    where b.account_id = ${accountId}
    order by b.estimated_end desc
    limit 1`;
  if (!op) return;
  const seconds = retryAfter(op);
  throw operationInProgress(
    `${WHAT[op.kind] ?? 'A bulk contact operation is running'}; single contact writes are held until it ends. Retry in about ${seconds} s.`,
    seconds,
  );
}

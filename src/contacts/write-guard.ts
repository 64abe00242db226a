import type { AnySql, Sql, Tx } from '../db';
import { operationInProgress } from '../errors';
import { mergeRetryAfterSeconds } from '../imports/retry-after';

/**
 * The bulk-write guard, whole: how single contact writes and bulk contact writers (an import's
 * merge, a schema change) keep out of each other's way. Both sides of the protocol live here; the
 * callers (src/contacts for single writes, worker/import/merge for the hold and batches,
 * src/imports/lifecycle.ts for the release with an import's final status, src/schema for `attribute
 * create`, the sweep) only call these functions.
 *
 * The protocol: a bulk writer first commits a `bulk_operations` row (holdContactWrites), then takes
 * the account's contact-write lock EXCLUSIVE once (drainContactWrites, or the schema change's own
 * transaction), which waits for every single write that passed its check before the row existed.
 * Its batches then hold the lock SHARED (batchHoldsAccount), which still keeps a schema change out.
 * A single write holds the lock SHARED for its transaction and checks for a row before and after
 * taking it (withContactWrite, or contact_write_admitted() inside one statement on the fast path), so
 * it either finished before the bulk operation started or is refused with 409
 * `operation_in_progress` and an honest Retry-After. Single writes never block each other.
 */

/** Kinds of bulk operation, as stored in bulk_operations.kind. */
export type BulkKind = 'contact-import' | 'schema-change';

const WHAT: Record<string, string> = {
  'contact-import': 'A bulk contact import is writing this account’s contacts',
  'schema-change': 'A contact schema change is running on this account',
};

/**
 * Runs one single-contact write in a transaction that cannot interleave with a bulk operation, or
 * refuses it with 409 `operation_in_progress` and a Retry-After (see retryAfter below).
 *
 * @example await withContactWrite(sql, accountId, (tx) => tx`update contacts set … where …`)
 */
export async function withContactWrite<T>(sql: Sql, accountId: string, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const result = await sql.begin(async (tx) => {
    // Checked before the lock too: a write arriving while the lock is held exclusive (a schema
    // change, an import's drain) is refused at once instead of waiting only to be refused then.
    await refuseDuringBulkOperation(tx, accountId);
    const [lock] = await tx<{ ok: boolean }[]>`select ${contactWriteLock(tx, accountId)} as ok`;
    if (!lock!.ok) await refuseDuringBulkOperation(tx, accountId);
    return fn(tx);
  });
  return result as T;
}

/**
 * The single write's lock and second check as one SQL expression, true when the write may go on:
 * contact_write_lock() (sql/migrations/0010) takes the account's lock shared and checks again with
 * a fresh snapshot, which a statement's own snapshot, taken before the wait, could not. The fast
 * path's writes call its body, contact_write_lock_here, inside contact_write_admitted (sql/migrations/0018).
 */
const contactWriteLock = (sql: AnySql, accountId: string) => sql`contact_write_lock(${accountId}::uuid)`;

/**
 * Records a bulk operation (own commit): from now on single writes of the account are refused.
 * Estimated to end `seconds` from now; a contact import's later batches move the estimate
 * (sql/merge/advance.sql). Idempotent for the same id.
 */
export async function holdContactWrites(
  sql: Sql,
  accountId: string,
  id: string,
  kind: BulkKind,
  seconds: number,
): Promise<void> {
  await sql`
    insert into bulk_operations (account_id, id, kind, estimated_end)
    values (${accountId}::uuid, ${id}::uuid, ${kind}, now() + make_interval(secs => ${seconds}))
    on conflict (account_id, id) do update set estimated_end = excluded.estimated_end`;
}

/**
 * Waits, in a transaction of its own, for every single write that passed its check before the hold
 * `holdId` (holdContactWrites), which must be visible where the lock is taken (see exclusiveLock).
 */
export async function drainContactWrites(sql: Sql, accountId: string, holdId: string): Promise<void> {
  await sql.begin((tx) => tx`select ${exclusiveLock(tx, accountId, holdId)}`);
}

/**
 * A merge batch's hold on the account, for its transaction: shared, so a schema change waits. A
 * statement of its own: on Citus it is sent to the node of the account's shards, where the single
 * writes take the lock (sql/migrations/0007_citus.sql).
 */
export async function batchHoldsAccount(tx: Tx, accountId: string): Promise<void> {
  await tx`select account_bulk_lock(${accountId}::uuid, false)`;
}

/** Ends a hold, in the caller's transaction (together with the import's final status). */
export async function releaseContactWrites(tx: AnySql, accountId: string, id: string): Promise<void> {
  await tx`delete from bulk_operations where account_id = ${accountId}::uuid and id = ${id}::uuid`;
}

/**
 * The account's contact-write lock, exclusive, for the caller's transaction; a statement of its own
 * (see above). With `holdId`, it fails unless that hold is visible on the node that takes the lock,
 * where the single writes check for it: on Citus a hold commits on every node in two phases, and a
 * node that failed between them sees it only once Citus recovers the transaction
 * (sql/migrations/0018). The caller's job or command fails and is tried again.
 */
export const exclusiveLock = (sql: AnySql, accountId: string, holdId?: string) =>
  holdId
    ? sql`account_bulk_lock(${accountId}::uuid, true, ${holdId}::uuid)`
    : sql`account_bulk_lock(${accountId}::uuid, true)`;

/** Long enough for an honest Retry-After on writes that arrive while a schema change runs. */
const SCHEMA_CHANGE_SECONDS = 5;

/**
 * Runs `fn` as a schema change that holds the account's contact writes. Three steps, because a
 * bulk_operations row inserted and deleted in one transaction would never be visible to the writers
 * it is meant to turn away: (1) publish the hold; (2) one transaction under the exclusive lock, so
 * nothing interleaves with the change; (3) remove the hold, whatever happened.
 */
export async function withSchemaChangeHold<T>(sql: Sql, accountId: string, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const holdId = crypto.randomUUID();
  await holdContactWrites(sql, accountId, holdId, 'schema-change', SCHEMA_CHANGE_SECONDS);
  try {
    return (await sql.begin(async (tx) => {
      await tx`select ${exclusiveLock(tx, accountId, holdId)}`;
      return fn(tx);
    })) as T;
  } finally {
    await releaseContactWrites(sql, accountId, holdId);
  }
}

/**
 * A schema change publishes its hold before it takes the lock and removes it after; a CLI killed
 * in between leaves the row, and every single write of the account would get 409 for good. A
 * change is one short transaction, so a hold a minute past its estimate has no live owner.
 * Removing it is safe even if one had: the row only turns writers away early, the lock is what
 * keeps them from interleaving with the change. Returns the holds removed.
 */
export async function releaseStaleSchemaHolds(sql: Sql): Promise<{ account_id: string; id: string }[]> {
  return sql<{ account_id: string; id: string }[]>`
    delete from bulk_operations
    where kind = 'schema-change' and estimated_end < now() - interval '1 minute'
    returning account_id, id`;
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
  if (
    op.kind === 'contact-import' &&
    op.quiet !== null &&
    op.active !== null &&
    op.checkpoint !== null &&
    op.row_count !== null
  ) {
    return mergeRetryAfterSeconds({
      secondsToEstimate: op.ahead,
      quietSeconds: op.quiet,
      activeSeconds: op.active,
      checkpoint: op.checkpoint,
      rowCount: op.row_count,
    });
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
    `${WHAT[op.kind] ?? 'A bulk contact operation is running'}; single contact writes are held until it ends. ` +
      `Retry in about ${seconds} s.`,
    seconds,
  );
}

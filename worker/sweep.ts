import type { Sql } from '../src/db';
import { errorFields, log } from '../src/log';
import { releaseStaleSchemaHolds } from '../src/contacts/write-guard';
import { expireRejectedRows, expireUnused, markUploaded } from '../src/imports/lifecycle';
import type { ImportQueue } from '../src/imports/queue';
import { importObjectKey } from '../src/storage';
import { pruneEvents } from '../src/events/retention';
import type { ObjectStore } from '../src/storage/store';
import { removeExpiredExports } from './exports/expire';

export interface SweepDeps {
  sql: Sql;
  storage: ObjectStore;
  queue: ImportQueue;
  /** EVENT_RETENTION_DAYS: events older than this leave the feed. */
  eventRetentionDays: number;
}

export interface SweepResult {
  /** Imports whose file was found in the S3 bucket and that are now uploaded. */
  arrived: string[];
  /** Imports failed because no file arrived within 24 hours. */
  expired: string[];
  /** Open imports whose job was missing or dead in Redis and was enqueued again. */
  requeued: string[];
  /** Schema-change holds left behind by an admin CLI that died mid-change, now removed. */
  released: string[];
  /** Imports whose rejected-rows report passed its retention and was removed. */
  reportsRemoved: string[];
  /** Accounts whose events past their retention were removed from the feed. */
  eventsPruned: string[];
  /** Contact exports whose file passed EXPORT_RETENTION_DAYS and was removed. */
  exportFilesRemoved: string[];
}

const HEAD_CONCURRENCY = 16;
const BATCH = 1_000;

/**
 * The `upload-sweep` job, every few seconds. Each step is one idempotent pass over Postgres state,
 * so two sweeps running at once (several worker processes) do no harm.
 */
export async function sweep(deps: SweepDeps): Promise<SweepResult> {
  // Arrivals first: a file that reached S3 in time is imported even if its sweep comes late.
  const arrived = deps.storage.driver === 's3' ? await detectArrivals(deps) : [];
  const expired = await expireUnusedImports(deps);
  const requeued = await requeueOrphans(deps);
  const released = await releaseStaleHolds(deps);
  const reportsRemoved = await removeExpiredReports(deps);
  const eventsPruned = (await pruneEvents(deps.sql, deps.eventRetentionDays)).map((p) => p.accountId);
  const exportFilesRemoved = await removeExpiredExports(deps.sql, deps.storage);
  return { arrived, expired, requeued, released, reportsRemoved, eventsPruned, exportFilesRemoved };
}

/** Rejected-rows reports past REJECTED_ROWS_RETENTION_DAYS: forgotten first, then their objects removed. */
async function removeExpiredReports({ sql, storage }: SweepDeps): Promise<string[]> {
  const rows = await expireRejectedRows(sql, BATCH);
  for (const r of rows) {
    await storage
      .remove(r.key)
      .catch((e) =>
        log('warn', 'removing an expired rejected-rows report failed', { importId: r.id, ...errorFields(e) }),
      );
  }
  if (rows.length) log('info', 'rejected-rows reports past their retention removed', { count: rows.length });
  return rows.map((r) => r.id);
}

/** Schema-change holds of admin CLIs that died mid-change (see releaseStaleSchemaHolds). */
async function releaseStaleHolds({ sql }: SweepDeps): Promise<string[]> {
  const rows = await releaseStaleSchemaHolds(sql);
  for (const r of rows)
    log('warn', 'schema-change hold without a live owner removed', { accountId: r.account_id, holdId: r.id });
  return rows.map((r) => r.id);
}

/**
 * S3 cannot tell us a presigned PUT finished, so HeadObject each awaiting import. Arrival counts by
 * the object's Last-Modified, so a file that arrived within 24 hours is taken even when this sweep
 * runs just after the deadline. object_etag stays NULL: the link stays valid for the hour and a
 * second PUT may still replace the file, so the worker pins the ETag when it starts.
 */
async function detectArrivals({ sql, storage, queue }: SweepDeps): Promise<string[]> {
  const waiting = await sql<{ account_id: string; id: string; object_key: string | null }[]>`
    select account_id, id, object_key from contact_imports
    where status = 'awaiting-upload' order by created_at limit ${BATCH}`;
  const arrived: string[] = [];
  await eachLimited(waiting, HEAD_CONCURRENCY, async (w) => {
    const key = w.object_key ?? importObjectKey(w.account_id, w.id);
    const info = await storage.head(key);
    if (!info) return;
    const at = info.lastModified ?? new Date();
    if (!(await markUploaded(sql, w.account_id, w.id, { key, size: info.size, at }))) return;
    arrived.push(w.id);
    await queue.enqueueImport(w.account_id, w.id);
    log('info', 'contact import uploaded', { accountId: w.account_id, importId: w.id, size: info.size });
  });
  return arrived;
}

/** Fails imports still awaiting a file 24 hours after creation (expireUnused), and drops what they have. */
async function expireUnusedImports({ sql, storage }: SweepDeps): Promise<string[]> {
  const rows = await expireUnused(sql);
  for (const r of rows) {
    log('info', 'contact import failed: no file within 24 hours', { accountId: r.account_id, importId: r.id });
    // A file that lands later is never imported; drop whatever is there now.
    await storage
      .remove(r.object_key ?? importObjectKey(r.account_id, r.id))
      .catch((e) => log('warn', 'removing an expired upload failed', { importId: r.id, ...errorFields(e) }));
  }
  return rows.map((r) => r.id);
}

/**
 * Postgres is the source of truth: an uploaded or importing import must have a live job. Redis may
 * have lost it (flush, failover), or its retries may have run out on a long outage.
 */
async function requeueOrphans({ sql, queue }: SweepDeps): Promise<string[]> {
  const open = await sql<{ account_id: string; id: string }[]>`
    select account_id, id from contact_imports
    where status in ('uploaded', 'importing') order by created_at limit ${BATCH}`;
  const requeued: string[] = [];
  for (const o of open) {
    const outcome = await queue.ensureImport(o.account_id, o.id, async () => {
      const [row] = await sql`
        select 1 from contact_imports
        where account_id = ${o.account_id} and id = ${o.id} and status in ('uploaded', 'importing')`;
      return row !== undefined;
    });
    if (outcome === 'live' || outcome === 'closed') continue;
    requeued.push(o.id);
    log('warn', 'contact import had no live job; enqueued again', { accountId: o.account_id, importId: o.id, outcome });
  }
  return requeued;
}

/** Runs `fn` over `items`, `limit` at a time; one item's failure (an S3 hiccup) is logged, not fatal. */
async function eachLimited<T extends { id: string }>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const run = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await fn(item).catch((e) =>
        log('warn', 'sweep step failed for an import; next sweep retries', { importId: item.id, ...errorFields(e) }),
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, run));
}

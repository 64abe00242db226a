import { Readable, pipeline } from 'node:stream';
import { createGzip, constants } from 'node:zlib';
import { isSuspended } from '../../src/auth/suspension';
import { type Sql, isConnectionGone } from '../../src/db';
import { exportObjectKey } from '../../src/exports/download';
import { EXPORT_LEASE_SECONDS } from '../../src/exports/retry-after';
import { customAttributes, getSchema } from '../../src/schema/service';
import { parseFilter } from '../../src/search/filter';
import { diskFullCause, isDiskFull } from '../../src/storage/disk-full';
import { isStoreUnavailable, type ObjectStore } from '../../src/storage/store';
import { copyRows } from './copy-rows';
import { countRows } from './count';
import { copyStatement, headerLine, type ExportColumn, type ExportFilter } from './select';
import { abortUpload, writeObject } from './sink';

/** Runs an export may take (a worker killed mid-run counts): past this the export fails. */
export const MAX_ATTEMPTS = 3;
/**
 * Runs an export may take when the ones that failed met the database away (a restart, a failover,
 * a cut connection): such a failure says nothing about the export, so it is waited out rather than
 * counted against it (src/db/unavailable.ts is the one rule). A run is only claimed once the
 * database answers again, so this counts outages that broke a running export, not seconds.
 */
export const MAX_RUNS_THROUGH_OUTAGES = 20;
/** Renewed this often, so a lease survives two missed renewals (a busy event loop, a slow statement). */
const RENEW_MS = (EXPORT_LEASE_SECONDS * 1000) / 4;
/** A run that failed is taken up again after this. */
const RETRY_AFTER_SECONDS = 5;

/** The export row as a claim returns it; object_key and upload_id are the previous run's, if any. */
export interface ClaimedExport {
  account_id: string;
  id: string;
  columns: string[];
  brand_ids: string[] | null;
  enabled: boolean | null;
  /** A filter of the search language as the request sent it, or null */
  search_filter: unknown;
  compression: 'none' | 'gzip';
  attempts: number;
  object_key: string | null;
  upload_id: string | null;
}

export interface ExportRunDeps {
  sql: Sql;
  storage: ObjectStore;
  /** EXPORT_RETENTION_DAYS */
  retentionDays: number;
  /** This process's lease token. */
  token: string;
  /** Whether the API is busy now: the COPY is then read at a lower rate (copy-rows.ts). Absent: never. */
  apiBusy?: () => boolean;
  log: (msg: string, fields?: Record<string, unknown>) => void;
}

class LeaseLostError extends Error {}

/** `suspended`: the account was suspended mid-run; the export is queued again, no attempt spent. */
export type RunEnd = 'success' | 'failed' | 'retry' | 'lost' | 'suspended';

/**
 * One run of a claimed export: the COPY's rows behind a header, gzip'd if asked (level 1: the file
 * is written once and a fast level keeps the worker from being the bottleneck), streamed to the
 * store; the lease renewed while it streams. Every statement on the row names the lease token: a
 * run that lost its lease changes nothing and drops its own object.
 */
export async function runExport(deps: ExportRunDeps, claimed: ClaimedExport): Promise<RunEnd> {
  const { sql, storage, token } = deps;
  const { account_id: accountId, id } = claimed;
  const gzip = claimed.compression === 'gzip';
  const held = async (set: ReturnType<Sql>) => {
    const rows = await sql`
      update contact_exports set ${set} where account_id = ${accountId} and id = ${id} and lease_token = ${token}
      returning 1`;
    if (rows.length === 0) throw new LeaseLostError(`export ${id} was taken over`);
  };
  // The previous run died (or failed) mid-file: its half-written object goes, and this run starts over.
  // Its key is not this run's, so a store that refuses the abort (s3rver has none; a key without
  // s3:AbortMultipartUpload) costs an orphaned upload, which a bucket lifecycle rule clears, never
  // the export: the run goes on.
  if (claimed.object_key)
    await abortUpload(storage, claimed.object_key, claimed.upload_id).catch((e) =>
      deps.log("could not drop the previous run's file; going on", {
        accountId,
        exportId: id,
        objectKey: claimed.object_key,
        error: e instanceof Error ? e.message : String(e),
      }),
    );
  const key = exportObjectKey(accountId, id, claimed.attempts, gzip);
  let copy: Awaited<ReturnType<typeof copyRows>> | undefined;
  let renewal: ReturnType<typeof setInterval> | undefined;
  let suspended = false;
  try {
    await held(sql`object_key = ${key}, upload_id = null`);
    const filter = await exportFilterOf(sql, claimed);
    const { columns, statement } = await exportStatement(sql, accountId, claimed.columns, filter);
    copy = await copyRows(sql, statement, deps.apiBusy && { apiBusy: deps.apiBusy });
    const running = copy;
    // The rows to expect, for percentComplete only: counted beside the COPY, never holding it up.
    void countRows(sql, accountId, filter)
      .then((n) => held(sql`rows_expected = ${n}`))
      .catch(() => {});
    renewal = setInterval(() => {
      held(
        sql`lease_until = now() + make_interval(secs => ${EXPORT_LEASE_SECONDS}), rows_written = ${running.rows()}`,
      ).catch((e) => {
        if (e instanceof LeaseLostError) running.abort(e);
      });
      // A file made for a suspended account would be served to no one: the run stops at this look (every
      // RENEW_MS), and starts over once the account is unsuspended.
      void isSuspended(sql, accountId)
        .then((now) => {
          if (!now) return;
          suspended = true;
          running.abort(new Error(`the account of export ${id} was suspended`));
        })
        .catch(() => {});
    }, RENEW_MS);
    async function* file(): AsyncGenerator<Buffer> {
      yield Buffer.from(headerLine(columns));
      yield* running.batches;
    }
    let body: AsyncIterable<Uint8Array> = Readable.from(file(), { objectMode: false });
    if (gzip) {
      const gz = createGzip({ level: constants.Z_BEST_SPEED });
      pipeline(body as Readable, gz, () => {});
      body = gz;
    }
    const type = gzip ? 'application/gzip' : 'text/csv; charset=utf-8';
    const bytes = await writeObject(storage, key, body, type, (uploadId) => held(sql`upload_id = ${uploadId}`));
    clearInterval(renewal);
    // Seen after the COPY had ended (a small export): the file goes too, as it would have mid-way.
    if (suspended) throw new Error(`the account of export ${id} was suspended`);
    await held(sql`
      status = 'success', row_count = ${running.rows()}, rows_written = ${running.rows()}, upload_id = null,
      completed_at = now(), file_expires_at = now() + make_interval(days => ${deps.retentionDays}),
      lease_token = null, lease_until = null`);
    deps.log('contact export done', {
      accountId,
      exportId: id,
      rows: running.rows(),
      bytes,
      pausedMs: running.pausedMs(),
    });
    return 'success';
  } catch (e) {
    clearInterval(renewal);
    copy?.abort(e instanceof Error ? e : new Error(String(e)));
    await abortUpload(storage, key, null).catch(() => {});
    if (e instanceof LeaseLostError) {
      deps.log('contact export run lost its lease; another worker has it', { accountId, exportId: id });
      return 'lost';
    }
    if (suspended) return putBack(deps, claimed);
    return giveUp(deps, claimed, e);
  }
}

/**
 * A failed run: taken up again after a pause, or, past MAX_ATTEMPTS (MAX_RUNS_THROUGH_OUTAGES when it
 * met the database away, a full disk or the object store away), the export fails with the reason.
 */
async function giveUp({ sql, token, log }: ExportRunDeps, claimed: ClaimedExport, e: unknown): Promise<RunEnd> {
  const message = (e instanceof Error ? e.message : String(e)).split('\n')[0]!.slice(0, 300);
  const storeAway = !isConnectionGone(e) && isStoreUnavailable(e);
  const reason = isDiskFull(e)
    ? `${diskFullCause(e)}: ${message}`
    : storeAway
      ? `the object store did not take the file: ${message}`
      : message;
  log('contact export run failed', { accountId: claimed.account_id, exportId: claimed.id, error: reason });
  // A full disk or an object store away, like a database outage, says nothing about the export: it is
  // waited out for as many runs.
  const waitedOut = isConnectionGone(e) || isDiskFull(e) || storeAway;
  const last = claimed.attempts >= (waitedOut ? MAX_RUNS_THROUGH_OUTAGES : MAX_ATTEMPTS);
  const failure = `The export stopped after ${claimed.attempts} failed attempts; the last error was: ${reason}`;
  const updated = await sql`
    update contact_exports set ${
      last
        ? sql`status = 'failed', failure_reason = ${failure},
            object_key = null, upload_id = null, lease_token = null, lease_until = null`
        : sql`object_key = null, upload_id = null, lease_token = null,
            lease_until = now() + make_interval(secs => ${RETRY_AFTER_SECONDS})`
    }
    where account_id = ${claimed.account_id} and id = ${claimed.id} and lease_token = ${token}
    returning 1`.catch(() => undefined);
  // Another run holds the export now (this one failed after its lease was taken): nothing was ours to change.
  if (updated?.length === 0) return 'lost';
  return last ? 'failed' : 'retry';
}

/** A run stopped by the account's suspension: queued again as if never claimed (no attempt counted). */
async function putBack({ sql, token, log }: ExportRunDeps, claimed: ClaimedExport): Promise<RunEnd> {
  const updated = await sql`
    update contact_exports set status = 'queued', attempts = attempts - 1, started_at = null, rows_written = 0,
      rows_expected = null, object_key = null, upload_id = null, lease_token = null, lease_until = null
    where account_id = ${claimed.account_id} and id = ${claimed.id} and lease_token = ${token}
    returning 1`.catch(() => undefined);
  if (updated?.length === 0) return 'lost';
  log('contact export stopped: its account is suspended; queued again', {
    accountId: claimed.account_id,
    exportId: claimed.id,
  });
  return 'suspended';
}

/**
 * The export's filter as its COPY applies it. A search filter was checked when the export was made;
 * it is parsed again against the schema as it is now, which only ever grows (attributes are never
 * removed), so it reads the same.
 */
async function exportFilterOf(sql: Sql, claimed: ClaimedExport): Promise<ExportFilter> {
  const search =
    claimed.search_filter === null || claimed.search_filter === undefined
      ? null
      : parseFilter(claimed.search_filter, { custom: await customAttributes(sql, claimed.account_id) });
  return { brandIds: claimed.brand_ids, enabled: claimed.enabled, search };
}

/**
 * The COPY a run executes for these columns and filter, with the columns' types: also the bench's
 * baseline (bench/steps/export.ts times the same statement drained by a client that keeps nothing).
 */
export async function exportStatement(
  sql: Sql,
  accountId: string,
  names: readonly string[],
  filter: ExportFilter,
): Promise<{ columns: ExportColumn[]; statement: string }> {
  const columns = await exportColumns(sql, accountId, names);
  const deleted = await sql<{ id: string }[]>`
    select id::text from brands where account_id = ${accountId} and deleted_at is not null`;
  const statement = copyStatement(
    accountId,
    columns,
    filter,
    deleted.map((b) => b.id),
  );
  return { columns, statement };
}

/** The columns with their types; attributes are never deleted, so a miss means the schema changed under it. */
async function exportColumns(sql: Sql, accountId: string, names: readonly string[]): Promise<ExportColumn[]> {
  const byName = new Map((await getSchema(sql, accountId)).map((a) => [a.name, a.type]));
  return names.map((name) => {
    if (name === 'Email') return { name, type: 'identity' };
    if (name === 'Brand') return { name, type: 'brand' };
    const type = byName.get(name);
    if (!type) throw new Error(`Column "${name}" is no longer in the contact schema.`);
    return { name, type };
  });
}

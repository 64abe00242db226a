import { join } from 'node:path';
import { releaseContactWrites } from '../contacts/write-guard';
import { type AnySql, type Sql, type Tx, violates } from '../db';

/**
 * A contact import's lifecycle, whole: every write of a contact_imports row's status, phase and
 * progress is one of these functions, and each is guarded in its WHERE clause by the state it must
 * come from, so a late or repeated caller (a second sweep, a retried job, a run another worker
 * took over) changes nothing. The API and the admin CLI create imports; the upload link, the S3
 * sweep and the admin CLI mark them uploaded; the worker moves them through its phases; the sweep
 * expires them; the worker and the admin CLI fail them; the API's cancel (an extension) fails them
 * before they start.
 *
 *   awaiting-upload ─markUploaded→ uploaded ─startRead→ importing: read ─readDone→ dedupe
 *     ─dedupeDone→ merge (advanceMerge, once per batch) ─finishImport→ success
 *   importing: dedupe or merge ─backToRead→ read (the staged rows were lost)
 *   awaiting-upload ─expireUnused→ failed;  awaiting-upload, uploaded, importing ─markImportFailed→ failed
 *   awaiting-upload, uploaded ─cancelImport→ failed (cancelled_at set)
 *   success ─expireRejectedRows→ success without its rejected-rows report (retention)
 */

/** What an import is declared with (the API's request, or the admin CLI's flags and file header). */
export interface NewImport {
  method: 'api' | 'manual';
  /** canonical schema names, in file order */
  columns: string[];
  strategy: 'overwrite' | 'keep' | 'skip';
  overwriteBrands: boolean;
  restoreDisabled: boolean;
  publishEvents: boolean;
  brandIds: string[];
  objectKey: string;
  /** How long the upload link takes a file: API imports (a manual import's file is the CLI's own copy). */
  uploadWindowSeconds?: number;
}

/**
 * The import's birth: `awaiting-upload`. Returns when its upload link expires (none without
 * uploadWindowSeconds). PostgreSQL admits one open import per account, whatever channel creates
 * it, through the partial unique index contact_imports_one_open (isOpenImportConflict).
 */
export async function insertImport(
  sql: AnySql,
  accountId: string,
  importId: string,
  i: NewImport,
): Promise<Date | null> {
  // updated/skipped counts start at 0: this service always keeps them (NULL means "before they were kept").
  const [row] = await sql<{ uploadExpiresAt: Date | null }[]>`
    insert into contact_imports (
      account_id, id, status, method, columns, duplicate_contact_strategy, overwrite_brands, restore_disabled,
      publish_events, brand_ids, updated_count, skipped_count, object_key, upload_expires_at)
    values (
      ${accountId}, ${importId}, 'awaiting-upload', ${i.method}, ${sql.array(i.columns)}, ${i.strategy},
      ${i.overwriteBrands}, ${i.restoreDisabled}, ${i.publishEvents}, ${sql.array(i.brandIds)}::uuid[], 0, 0,
      ${i.objectKey}, now() + ${i.uploadWindowSeconds ?? null}::float8 * interval '1 second')
    returning upload_expires_at as "uploadExpiresAt"`;
  return row!.uploadExpiresAt;
}

/** Whether `e` is PostgreSQL refusing a second open import of an account (see insertImport). */
export function isOpenImportConflict(e: unknown): boolean {
  return violates(e, 'contact_imports_one_open');
}

/** A file that reached the import's object key. */
export interface Upload {
  key: string;
  size: number;
  /** Pinned at once: only for a file nothing can replace (the admin CLI's own copy); else the worker pins it. */
  etag?: string;
  /** When it arrived (S3's Last-Modified, so a sweep that comes late is fair); the database's now() if omitted. */
  at?: Date;
  /** The upload link's file replaces an uploaded one until the import starts: the last one before it is imported. */
  replaces?: boolean;
}

/**
 * The file arrived: `uploaded`, from `awaiting-upload` (or, for a file that `replaces`, from
 * `uploaded` not yet started), if it arrived within 24 hours of creation. Returns whether the
 * import took the file; false changes nothing. In the caller's transaction, the row stays locked
 * until that commits (src/uploads/complete.ts puts the file in place meanwhile).
 */
export async function markUploaded(sql: AnySql, accountId: string, importId: string, u: Upload): Promise<boolean> {
  const from = u.replaces ? sql`('awaiting-upload', 'uploaded')` : sql`('awaiting-upload')`;
  // Not coalesce(at, now()): Citus refuses now() inside a COALESCE or CASE of a write.
  const at = u.at ? sql`${u.at}::timestamptz` : sql`now()`;
  const [row] = await sql`
    update contact_imports
    set status = 'uploaded', object_key = ${u.key}, object_etag = ${u.etag ?? null}, object_size = ${u.size},
        uploaded_at = ${at}, updated_at = now()
    where account_id = ${accountId} and id = ${importId}
      and status in ${from} and started_at is null
      -- Not created_at + interval: Citus cannot send a stable function of a column (timestamptz + interval).
      and created_at > ${at} - interval '24 hours'
    returning id`;
  return row !== undefined;
}

export const NO_FILE_REASON = 'No file arrived within 24 hours of creation.';

/**
 * Fails every import still awaiting a file 24 hours after creation, and returns them. A local
 * upload still streaming at that moment is refused at completion by markUploaded's same 24-hour
 * condition, so nothing is half-taken.
 */
export async function expireUnused(sql: Sql): Promise<{ account_id: string; id: string; object_key: string | null }[]> {
  return sql<{ account_id: string; id: string; object_key: string | null }[]>`
    update contact_imports
    set status = 'failed', failure_reason = ${NO_FILE_REASON}, updated_at = now()
    where status = 'awaiting-upload' and created_at <= now() - interval '24 hours'
    returning account_id, id, object_key`;
}

/**
 * A worker (re)starts reading the file: `importing`, phase `read`, from `uploaded` or from a run
 * that stopped. Every start counts as an attempt; started_at is the first one.
 */
export async function startRead(sql: Sql, accountId: string, importId: string): Promise<boolean> {
  const r = await sql`
    update contact_imports
    set status = 'importing', phase = 'read',
        -- Kept when the rows are read again for a merge under way (see ensureStaged in worker/import/dedupe.ts).
        percent_complete = case when row_count is null then 0 else percent_complete end,
        -- The first start's time: LEAST ignores a NULL (Citus refuses now() inside a COALESCE or CASE).
        started_at = least(started_at, now()), attempts = attempts + 1, updated_at = now()
    where account_id = ${accountId}::uuid and id = ${importId}::uuid and status in ('uploaded', 'importing')`;
  return r.count > 0;
}

/** The ETag (and size) the import reads, once: a later PUT is never imported. */
export async function pinEtag(
  sql: Sql,
  accountId: string,
  importId: string,
  etag: string,
  size: number,
): Promise<void> {
  await sql`
    update contact_imports set object_etag = ${etag}, object_size = ${size}, updated_at = now()
    where account_id = ${accountId}::uuid and id = ${importId}::uuid and object_etag is null`;
}

/** What the read phase found: counts, and what the rejected-rows report needs to find rows again. */
export interface ReadFacts {
  malformed: number;
  staged: number;
  /** every row the CSV parser gave, blank lines and the header included */
  fileRows: number;
  /** the line ending the parser chose */
  linebreak: string;
  /** whether the read recorded the rows it rejected (the report is on) */
  recorded: boolean;
}

/**
 * The file is read: phase `dedupe`. The malformed count is committed only here, so a read killed
 * half way leaves nothing that a second read could count twice.
 */
export async function readDone(sql: Sql, accountId: string, importId: string, read: ReadFacts): Promise<boolean> {
  const r = await sql`
    update contact_imports
    set malformed_count = ${read.malformed}, staged_count = ${read.staged},
        file_rows = ${read.fileRows}, file_linebreak = ${read.linebreak}, rejects_recorded = ${read.recorded},
        phase = 'dedupe', updated_at = now()
    where account_id = ${accountId}::uuid and id = ${importId}::uuid and status = 'importing' and phase = 'read'`;
  return r.count > 0;
}

/**
 * Dedupe is done: phase `merge`, in the transaction that drops the raw rows. A first dedupe sets
 * rowCount and the counters and starts the merge at checkpoint 0; a rebuilt merge table (the
 * first was lost) leaves checkpoint, counters and percentage as the merge under way left them.
 */
export async function dedupeDone(
  tx: Tx,
  accountId: string,
  importId: string,
  d: { staged: number; kept: number; rebuilt: boolean },
): Promise<boolean> {
  if (d.rebuilt) {
    const r = await tx`
      update contact_imports set phase = 'merge', updated_at = now()
      where account_id = ${accountId}::uuid and id = ${importId}::uuid and status = 'importing' and phase = 'dedupe'`;
    return r.count > 0;
  }
  const r = await tx`
    update contact_imports
    set row_count = ${d.kept}, duplicate_in_file_count = ${d.staged - d.kept},
        added_count = 0, updated_count = 0, skipped_count = 0,
        checkpoint = 0, percent_complete = 0, phase = 'merge', updated_at = now()
    where account_id = ${accountId}::uuid and id = ${importId}::uuid and status = 'importing' and phase = 'dedupe'`;
  return r.count > 0;
}

/** The staged rows were lost (a PostgreSQL crash empties unlogged tables): phase `read` again, progress kept. */
export async function backToRead(
  sql: Sql,
  accountId: string,
  importId: string,
  from: 'dedupe' | 'merge',
): Promise<void> {
  await sql`
    update contact_imports set phase = 'read', updated_at = now()
    where account_id = ${accountId}::uuid and id = ${importId}::uuid and status = 'importing' and phase = ${from}`;
}

/** One merge batch, (from, to] of the import's seq, and what became of its rows. */
export interface MergedBatch {
  from: number;
  to: number;
  added: number;
  updated: number;
  skipped: number;
  rowCount: number;
  /** when the whole merge should end, at the pace so far (the Retry-After of refused single writes) */
  estimatedEnd: Date;
}

const ADVANCE_SQL = join(import.meta.dir, '../../sql/merge/advance.sql');
let advanceText: Promise<string> | undefined;

/**
 * A merge batch's last statement, in the batch's transaction (sql/merge/advance.sql): checkpoint,
 * counters and percentage move past the batch, from exactly its first seq. Returns the new
 * percentage, or undefined when the checkpoint was not there (or the import is no running merge):
 * the caller then rolls the batch back.
 */
export async function advanceMerge(
  tx: Tx,
  accountId: string,
  importId: string,
  b: MergedBatch,
): Promise<number | undefined> {
  advanceText ??= Bun.file(ADVANCE_SQL).text();
  const [advanced] = await tx.unsafe<{ percentComplete: number }[]>(
    await advanceText,
    [accountId, importId, b.from, b.to, b.added, b.updated, b.skipped, b.rowCount, b.estimatedEnd],
    { prepare: false },
  );
  return advanced?.percentComplete;
}

/** A written rejected-rows report: its object and line count, kept for `retentionDays`. */
export interface RejectedRowsReport {
  key: string;
  lines: number;
  retentionDays: number;
}

/**
 * `success` with completedAt, percentComplete gone (it exists only while importing), the
 * rejected-rows report if one was written, and the bulk-operation hold lifted, in one commit. Only
 * a merge that accounted for every row can finish.
 */
export async function finishImport(
  sql: Sql,
  accountId: string,
  importId: string,
  report?: RejectedRowsReport,
): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`
      update contact_imports
      set status = 'success', completed_at = now(), percent_complete = null, phase = 'finish', updated_at = now(),
          rejected_rows_key = ${report?.key ?? null}, rejected_rows_count = ${report?.lines ?? null},
          rejected_rows_expires_at = now() + ${report?.retentionDays ?? null}::int * interval '1 day'
      where account_id = ${accountId}::uuid and id = ${importId}::uuid
        and status = 'importing' and phase = 'merge' and checkpoint >= coalesce(row_count, 0)`;
    await releaseContactWrites(tx, accountId, importId);
  });
}

/**
 * Reports past their retention, forgotten: the sweep removes their objects after this commits (a
 * crash in between leaves an object no import points to, which the store's own expiry may take).
 * The candidates of every account are found first, then each is forgotten by a statement of its own
 * account, guarded on the key it had: on a Citus cluster a row lock cannot be taken by a query over
 * every account's shards, and a sweep running beside this one forgets each report once all the same.
 */
export async function expireRejectedRows(sql: Sql, limit: number): Promise<{ id: string; key: string }[]> {
  const due = await sql<{ account_id: string; id: string; key: string }[]>`
    select account_id, id, rejected_rows_key as key from contact_imports
    where rejected_rows_key is not null and rejected_rows_expires_at <= now()
    order by rejected_rows_expires_at
    limit ${limit}`;
  const expired: { id: string; key: string }[] = [];
  for (const r of due) {
    // expires_at stays: it tells a report that is no longer kept from an import that had none.
    const moved = await sql`
      update contact_imports set rejected_rows_key = null, rejected_rows_count = null
      where account_id = ${r.account_id}::uuid and id = ${r.id}::uuid and rejected_rows_key = ${r.key}`;
    if (moved.count > 0) expired.push({ id: r.id, key: r.key });
  }
  return expired;
}

/**
 * `failed` with a reason, and the hold on single contact writes ended, in one commit. A no-op for
 * an import already final. The worker's last-attempt handler calls it too: an import whose retries
 * ran out must not stay `importing` forever.
 */
export async function markImportFailed(sql: Sql, accountId: string, importId: string, reason: string): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`
      update contact_imports
      set status = 'failed', failure_reason = ${reason}, percent_complete = null, updated_at = now()
      where account_id = ${accountId}::uuid and id = ${importId}::uuid
        and status in ('awaiting-upload', 'uploaded', 'importing')`;
    await releaseContactWrites(tx, accountId, importId);
  });
}

export const CANCELLED_REASON = 'The import was cancelled.';

/**
 * `failed` because the client cancelled it (POST /v1/contact-imports/{id}/cancel, an extension), from
 * `awaiting-upload` or `uploaded` only: an import the worker started cannot be given up without
 * leaving part of its rows written. One guarded UPDATE, so a worker's startRead at the same moment
 * and this never both win: the row lock orders them and the second one's WHERE no longer matches.
 * Returns whether it moved; when not, the caller reads the row to say why. No contact-write hold to
 * release: only a merge takes one.
 */
export async function cancelImport(sql: AnySql, accountId: string, importId: string): Promise<boolean> {
  const r = await sql`
    update contact_imports
    set status = 'failed', failure_reason = ${CANCELLED_REASON}, cancelled_at = now(), percent_complete = null,
        updated_at = now()
    where account_id = ${accountId} and id = ${importId} and status in ('awaiting-upload', 'uploaded')`;
  return r.count > 0;
}

import type { Sql } from '../db';
import { markUploaded } from '../imports/lifecycle';
import type { LocalStore, Received } from '../storage/local';

/** Whether an import still takes a file, and how long its 24-hour window has left (DB clock). */
export async function uploadWindow(
  sql: Sql,
  accountId: string,
  importId: string,
): Promise<{ open: boolean; msLeft: number }> {
  const [row] = await sql<{ open: boolean; ms_left: number }[]>`
    select status in ('awaiting-upload', 'uploaded') and started_at is null as open,
           extract(epoch from (created_at + interval '24 hours' - now())) * 1000 as ms_left
    from contact_imports where account_id = ${accountId} and id = ${importId}`;
  return row ? { open: row.open && row.ms_left > 0, msLeft: Number(row.ms_left) } : { open: false, msLeft: 0 };
}

/**
 * Makes a received file the import's object, if the import still takes one: awaiting upload, or
 * uploaded but not yet started (the last file before the start is the one imported), and within
 * 24 hours of creation (markUploaded). The row lock of its UPDATE is held while the file is renamed
 * into place, so the worker's start (which updates the same row) comes wholly before or wholly after it. Returns false,
 * changing nothing, when the import no longer takes a file.
 *
 * object_etag stays NULL: the worker pins the ETag at its start, from `head`, after its own update
 * of this row. An ETag written here could be read stale by a worker that loaded the row just before
 * a second PUT, and would then name a version that no longer exists.
 */
export async function completeUpload(
  sql: Sql,
  store: LocalStore,
  accountId: string,
  importId: string,
  key: string,
  r: Received,
): Promise<boolean> {
  return sql.begin(async (tx) => {
    if (!(await markUploaded(tx, accountId, importId, { key, size: r.size, replaces: true }))) return false;
    await store.commit(key, r);
    return true;
  });
}

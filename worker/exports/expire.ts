import type { Sql } from '../../src/db';
import { errorFields, log } from '../../src/log';
import type { ObjectStore } from '../../src/storage/store';

const BATCH = 1_000;

/**
 * Export files past EXPORT_RETENTION_DAYS (file_expires_at): the object removed first, then the row
 * forgets it, so a removal that fails is tried again by the next sweep; no link is made for a file
 * past its time meanwhile (src/exports/view.ts). The export itself stays listed, without downloadUrl.
 */
export async function removeExpiredExports(sql: Sql, storage: ObjectStore): Promise<string[]> {
  const rows = await sql<{ account_id: string; id: string; object_key: string }[]>`
    select account_id, id, object_key from contact_exports
    where status = 'success' and object_key is not null and file_expires_at <= now()
    order by file_expires_at
    limit ${BATCH}`;
  const removed: string[] = [];
  for (const r of rows) {
    try {
      await storage.remove(r.object_key);
      await sql`
        update contact_exports set object_key = null
        where account_id = ${r.account_id} and id = ${r.id} and object_key = ${r.object_key}`;
      removed.push(r.id);
    } catch (e) {
      log('warn', 'removing an expired export file failed; the next sweep retries', {
        exportId: r.id,
        ...errorFields(e),
      });
    }
  }
  return removed;
}

import type { Sql } from '../db';
import { conflict, notFound } from '../errors';
import { errorFields, log } from '../log';
import { importObjectKey } from '../storage';
import type { ObjectStore } from '../storage/store';
import { cancelImport } from './lifecycle';
import { IMPORT_COLUMNS, toImport, type ImportRow } from './view';

type CancelRow = ImportRow & { cancelled_at: Date | null; object_key: string | null };

/**
 * POST /v1/contact-imports/{id}/cancel, an extension beyond the contract: gives up an import that
 * has not started (`awaiting-upload` or `uploaded`), so that its account may open the next one at
 * once. The move is lifecycle.ts's one guarded UPDATE; the row read after it says what to answer
 * and cannot change under us, since `failed` and `success` are final and an `importing` import
 * never goes back. A repeated cancel is the same 200; an import that started, or ended otherwise,
 * is a 409 saying which.
 */
export async function cancelContactImport(
  sql: Sql,
  storage: ObjectStore | undefined,
  publicUrl: string,
  accountId: string,
  importId: string,
) {
  const moved = await cancelImport(sql, accountId, importId);
  const [row] = await sql<CancelRow[]>`
    select ${sql(IMPORT_COLUMNS as unknown as string[])}, cancelled_at, object_key from contact_imports
    where account_id = ${accountId} and id = ${importId}`;
  if (!row) throw notFound(`No contact import ${importId} in this account.`);
  if (row.cancelled_at === null) throw conflict(whyNot(row));
  if (moved) log('info', 'contact import cancelled', { accountId, importId });
  // On every cancel, not only the first: an S3 presigned link takes a PUT for its whole hour,
  // whatever the import's state (the local link refuses one), so a file may land after the cancel.
  if (storage) await removeObject(storage, row.object_key ?? importObjectKey(accountId, importId), importId);
  return toImport(row, publicUrl);
}

function whyNot(row: ImportRow): string {
  const it = `Contact import ${row.id}`;
  if (row.status === 'importing') return `${it} is importing: its rows are being written, so it cannot be cancelled.`;
  if (row.status === 'success') return `${it} has succeeded: a finished import cannot be cancelled.`;
  if (row.status !== 'failed') return `${it} is ${row.status}; try again.`; // not reached: the UPDATE took it
  // A failure other than a cancel: failed is final.
  const reason = row.failure_reason ? ` (${row.failure_reason})` : '';
  return `${it} has failed${reason}: a finished import cannot be cancelled.`;
}

/** Best effort, after the commit: the import stays cancelled whatever the store says (as in the sweep). */
async function removeObject(storage: ObjectStore, key: string, importId: string): Promise<void> {
  await storage
    .remove(key)
    .catch((e) => log('warn', 'removing a cancelled import’s file failed', { importId, ...errorFields(e) }));
}

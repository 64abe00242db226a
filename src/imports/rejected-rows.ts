import { Readable } from 'node:stream';
import type { Sql } from '../db';
import { notFound, serviceUnavailable } from '../errors';
import { isStoreUnavailable, ObjectChangedError, type ObjectStore } from '../storage/store';
import { hasRejectedRows, type ImportRow } from './view';

/** After the S3 client's own retries (seconds of backoff) failed: a few seconds more. */
const STORE_RETRY_AFTER_SECONDS = 5;

type ReportRow = Pick<ImportRow, 'status' | 'rejected_rows_key' | 'rejected_rows_expires_at'>;

/**
 * GET /v1/contact-imports/{id}/rejected-rows, an extension beyond the contract: the import's
 * rejected-rows report (worker/import/report.ts), streamed from the object store as it was written.
 * 404 while the import runs, for an import without rejected rows (or whose report was off), and
 * once the report is past its retention.
 */
export async function rejectedRowsResponse(
  sql: Sql,
  storage: ObjectStore | undefined,
  accountId: string,
  importId: string,
): Promise<Response> {
  const [row] = await sql<ReportRow[]>`
    select status, rejected_rows_key, rejected_rows_expires_at from contact_imports
    where account_id = ${accountId} and id = ${importId}`;
  if (!row) throw notFound(`No contact import ${importId} in this account.`);
  if (!hasRejectedRows(row) || !storage) throw notFound(noReport(importId, row));
  let body: Readable;
  try {
    body = await storage.read(row.rejected_rows_key!);
  } catch (e) {
    // Removed under us (its retention ended between the query and the read): as if never there.
    if (e instanceof ObjectChangedError) throw notFound(noReport(importId, row));
    // The store stayed away through the client's retries: the same request can succeed later.
    if (isStoreUnavailable(e))
      throw serviceUnavailable(
        'The object store holding the report did not answer; send again.',
        STORE_RETRY_AFTER_SECONDS,
        e,
      );
    throw e;
  }
  return new Response(Readable.toWeb(body) as ReadableStream, {
    headers: {
      'content-type': 'text/csv; charset=utf-8',
      'content-disposition': `attachment; filename="contact-import-${importId}-rejected-rows.csv"`,
      'cache-control': 'private, no-store',
    },
  });
}

function noReport(importId: string, row: ReportRow): string {
  const it = `Contact import ${importId}`;
  if (row.status !== 'success' && row.status !== 'failed') return `${it} is ${row.status}: it has no report yet.`;
  // A failed import ended on a fault of its file or of the service, not of single rows: which of its rows
  // were written is told by the failure, not by a report.
  if (row.status === 'failed') return `${it} failed: a failed import has no rejected-rows report.`;
  if (row.rejected_rows_key === null && row.rejected_rows_expires_at === null)
    return `${it} rejected no rows: it has no rejected-rows report.`;
  return `The rejected-rows report of ${it} is no longer kept.`;
}

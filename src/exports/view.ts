import type { DownloadLinks } from './download';
import { LINK_MS } from './download';

/** A contact_exports row as the API reads it. */
export interface ExportRow {
  account_id: string;
  id: string;
  status: 'queued' | 'exporting' | 'success' | 'failed';
  columns: string[];
  brand_ids: string[] | null;
  enabled: boolean | null;
  /** A filter of the search language, as sent (null: none, or the brand_ids/enabled shorthand) */
  search_filter: unknown;
  compression: 'none' | 'gzip';
  rows_expected: string | number | null;
  rows_written: string | number;
  row_count: string | number | null;
  failure_reason: string | null;
  object_key: string | null;
  file_expires_at: Date | null;
  created_at: Date;
  completed_at: Date | null;
}

export const EXPORT_COLUMNS = `account_id, id, status, columns, brand_ids, enabled, search_filter, compression,
  rows_expected, rows_written, row_count, failure_reason, object_key, file_expires_at, created_at, completed_at`;

/** How far an exporting run is, from the rows written and the rows counted beside it (99 at most until done). */
export function percentOf(row: Pick<ExportRow, 'rows_expected' | 'rows_written'>): number {
  const expected = Number(row.rows_expected ?? 0);
  if (expected <= 0) return 0;
  return Math.min(99, Math.floor((Number(row.rows_written) * 100) / expected));
}

/** The export as the API shows it, with a fresh download link while the file is kept. */
export async function toExport(row: ExportRow, links: DownloadLinks, now = Date.now()) {
  const gzip = row.compression === 'gzip';
  let download: { downloadUrl: string; downloadExpiresAt: string } | undefined;
  if (
    row.status === 'success' &&
    row.object_key !== null &&
    row.file_expires_at &&
    row.file_expires_at.getTime() > now
  ) {
    // Never past the file's retention: the sweep removes the file then.
    const expires = Math.min(now + LINK_MS, row.file_expires_at.getTime());
    const expiresAt = Math.floor(expires / 1000);
    const url = await links.link({ accountId: row.account_id, exportId: row.id, expiresAt }, row.object_key, gzip);
    if (url) download = { downloadUrl: url, downloadExpiresAt: new Date(expiresAt * 1000).toISOString() };
  }
  return {
    id: row.id,
    status: row.status,
    columns: row.columns,
    filter: (row.search_filter as Record<string, unknown> | null) ?? {
      ...(row.brand_ids !== null && { brandIds: row.brand_ids }),
      ...(row.enabled !== null && { enabled: row.enabled }),
    },
    compression: row.compression,
    ...(row.status === 'success' && { rowCount: Number(row.row_count ?? 0) }),
    ...(row.status === 'exporting' && { percentComplete: percentOf(row) }),
    ...download,
    ...(row.status === 'failed' && { failureReason: row.failure_reason ?? 'The export failed.' }),
    createdAt: row.created_at.toISOString(),
    ...(row.status === 'success' && row.completed_at && { completedAt: row.completed_at.toISOString() }),
  };
}

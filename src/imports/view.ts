/** The contact_imports columns the API shows. */
export interface ImportRow {
  id: string;
  status: 'awaiting-upload' | 'uploaded' | 'importing' | 'failed' | 'success';
  method: 'api' | 'manual';
  duplicate_contact_strategy: 'overwrite' | 'keep' | 'skip';
  overwrite_brands: boolean;
  restore_disabled: boolean;
  row_count: number | null;
  added_count: number;
  updated_count: number | null;
  skipped_count: number | null;
  malformed_count: number;
  duplicate_in_file_count: number | null;
  percent_complete: number | null;
  failure_reason: string | null;
  created_at: Date;
  completed_at: Date | null;
  updated_at: Date;
  rejected_rows_key: string | null;
  rejected_rows_expires_at: Date | null;
}

export const IMPORT_COLUMNS = [
  'id',
  'status',
  'method',
  'duplicate_contact_strategy',
  'overwrite_brands',
  'restore_disabled',
  'row_count',
  'added_count',
  'updated_count',
  'skipped_count',
  'malformed_count',
  'duplicate_in_file_count',
  'percent_complete',
  'failure_reason',
  'created_at',
  'completed_at',
  'updated_at',
  'rejected_rows_key',
  'rejected_rows_expires_at',
] as const;

/** Whether the import has a rejected-rows report to read now (written, and not past its retention). */
export function hasRejectedRows(row: Pick<ImportRow, 'status' | 'rejected_rows_key' | 'rejected_rows_expires_at'>) {
  return (
    row.status === 'success' &&
    typeof row.rejected_rows_key === 'string' &&
    (row.rejected_rows_expires_at === null || row.rejected_rows_expires_at.getTime() > Date.now())
  );
}

/**
 * A row as the spec's Contact import object. Presence follows the status, not just NULLs, so a
 * leftover value (a percentage after success, a reason on a retried import) never shows.
 * `rejectedRowsUrl` (an extension beyond the contract) is there only while the import has a report;
 * `publicUrl` is the base URL clients reach the API at.
 */
export function toImport(row: ImportRow, publicUrl: string) {
  const { status } = row;
  return {
    id: row.id,
    status,
    method: row.method,
    ...(status === 'importing' && { percentComplete: Math.min(100, Math.max(0, row.percent_complete ?? 0)) }),
    ...(row.row_count !== null && { rowCount: Number(row.row_count) }),
    addedCount: Number(row.added_count),
    ...(row.updated_count !== null && { updatedCount: Number(row.updated_count) }),
    ...(row.skipped_count !== null && { skippedCount: Number(row.skipped_count) }),
    malformedCount: Number(row.malformed_count),
    ...(row.duplicate_in_file_count !== null && { duplicateInFileCount: Number(row.duplicate_in_file_count) }),
    ...(status === 'failed' && { failureReason: row.failure_reason ?? 'The import failed.' }),
    duplicateContactStrategy: row.duplicate_contact_strategy,
    overwriteBrands: row.overwrite_brands,
    restoreDisabled: row.restore_disabled,
    createdAt: row.created_at.toISOString(),
    ...(status === 'success' && { completedAt: (row.completed_at ?? row.updated_at).toISOString() }),
    ...(hasRejectedRows(row) && { rejectedRowsUrl: `${publicUrl}/v1/contact-imports/${row.id}/rejected-rows` }),
  };
}

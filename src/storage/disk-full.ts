/**
 * The one rule for "a disk is full": PostgreSQL's SQLSTATE 53100 disk_full (a table, index or
 * temporary file could not grow), or a file write of this process that met ENOSPC or EDQUOT (the
 * local object store, the worker's temporary files). Such a failure says nothing about the request
 * or the import that met it: the same work succeeds once an operator frees space. The API answers
 * it with 503 and Retry-After (src/http/unavailable.ts), the upload link with 507 (the body is what
 * does not fit, src/uploads/index.ts), an import waits and resumes (worker/import/index.ts).
 *
 * A full disk under PostgreSQL's WAL is not this: the server PANICs and restarts, which the rule
 * for "the database is away" covers (src/db/unavailable.ts).
 */
export function isDiskFull(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '53100' || code === 'ENOSPC' || code === 'EDQUOT';
}

/** Which disk, in words for a failure reason or a log line. */
export function diskFullCause(error: unknown): string {
  const code = String((error as { code?: unknown } | null)?.code);
  return code === '53100'
    ? "the database's disk is full (PostgreSQL: 53100 disk_full)"
    : `the disk of the object store or of the worker's temporary files is full (${code})`;
}

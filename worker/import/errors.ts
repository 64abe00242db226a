import { UnrecoverableError } from 'bullmq';

/**
 * The import failed for good and its row says so (`failed`, `failureReason`). Extends BullMQ's
 * UnrecoverableError so the queue does not retry a job whose file can never import.
 */
export class UnrecoverableImportError extends UnrecoverableError {
  constructor(
    readonly importId: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`contact import ${importId} failed: ${reason}`);
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

/** A permanent problem of the file itself (header, encoding, emptiness): the import fails with `message`. */
export class ImportFileError extends Error {}

/** Another worker is running this import right now; retrying later is right. */
export class ImportBusyError extends Error {}

/** The staged rows did not survive (a PostgreSQL crash empties unlogged tables): read again. */
export class StagingLostError extends Error {}

import { UnrecoverableError } from 'bullmq';
import type { Sql } from '../../src/db';

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

export type Strategy = 'overwrite' | 'keep' | 'skip';
export type Phase = 'read' | 'dedupe' | 'merge' | 'finish';

/** The contact_imports row as the pipeline needs it. */
export interface ImportJob {
  accountId: string;
  id: string;
  status: 'awaiting-upload' | 'uploaded' | 'importing' | 'failed' | 'success';
  method: 'api' | 'manual';
  columns: string[];
  strategy: Strategy;
  overwriteBrands: boolean;
  restoreDisabled: boolean;
  publishEvents: boolean;
  brandIds: string[];
  rowCount: number | null;
  objectKey: string | null;
  objectEtag: string | null;
  phase: Phase | null;
  checkpoint: number;
}

export async function loadImport(sql: Sql, accountId: string, importId: string): Promise<ImportJob | undefined> {
  const [row] = await sql<ImportJob[]>`
    select account_id as "accountId", id, status, method, columns,
           duplicate_contact_strategy as strategy, overwrite_brands as "overwriteBrands",
           restore_disabled as "restoreDisabled", publish_events as "publishEvents",
           brand_ids::text[] as "brandIds", row_count as "rowCount", object_key as "objectKey",
           object_etag as "objectEtag", phase, checkpoint
    from contact_imports
    where account_id = ${accountId}::uuid and id = ${importId}::uuid`;
  return row;
}

/** What the pipeline has to hand to every phase. */
export interface Pipeline {
  sql: Sql;
  job: ImportJob;
  batchSize: number;
  log: (msg: string, fields?: object) => void;
}

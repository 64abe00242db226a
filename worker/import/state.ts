import type { Staging } from './staging';
import type postgres from 'postgres';
import type { Sql } from '../../src/db';
import type { ObjectStore } from '../../src/storage/store';
import type { ApiLoadNow } from '../../src/imports/api-load';

export type Strategy = 'overwrite' | 'keep' | 'skip';
export type Phase = 'read' | 'dedupe' | 'merge' | 'finish';

/** The contact_imports row as the pipeline needs it, as loaded at the start of a run. */
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
  objectSize: number | null;
  /** the last read recorded the rows it rejected, for the report (see readDone) */
  rejectsRecorded: boolean;
  fileRows: number | null;
  fileLinebreak: string | null;
  phase: Phase | null;
  checkpoint: number;
}

export async function loadImport(sql: Sql, accountId: string, importId: string): Promise<ImportJob | undefined> {
  const [row] = await sql<ImportJob[]>`
    select account_id as "accountId", id, status, method, columns,
           duplicate_contact_strategy as strategy, overwrite_brands as "overwriteBrands",
           restore_disabled as "restoreDisabled", publish_events as "publishEvents",
           brand_ids::text[] as "brandIds", row_count as "rowCount", object_key as "objectKey",
           object_etag as "objectEtag", object_size as "objectSize",
           rejects_recorded as "rejectsRecorded", file_rows as "fileRows", file_linebreak as "fileLinebreak",
           phase, checkpoint
    from contact_imports
    where account_id = ${accountId}::uuid and id = ${importId}::uuid`;
  return row;
}

/**
 * What a run does next. Each phase returns its successor with what it learned, so the run's
 * state is the step in hand, never a field a phase changed. `resume` is a merge taken up from its
 * committed state, whose merge table must be checked first (ensureStaged); `stopped` is an import
 * that stopped being a running merge under us (failed or finished by another hand).
 */
export type Step =
  | { phase: 'read' }
  | { phase: 'dedupe' }
  | ({ phase: 'resume' } & MergeProgress)
  | ({ phase: 'merge' } & MergeProgress)
  | { phase: 'finish' }
  | { phase: 'done' }
  | { phase: 'stopped' }
  /** gave its place in the worker to another account's import; the job goes back to the queue */
  | { phase: 'yielded' };

/** Where a merge stands: the rows to merge and the last seq committed. */
export interface MergeProgress {
  rowCount: number;
  checkpoint: number;
}

/** What the pipeline hands to every phase: the run's import, connections and settings. */
export interface Pipeline {
  sql: Sql;
  /**
   * The run's reserved connection: it holds the run's session locks (the import's, the account's
   * merge lock) and carries the read phase's COPY, which must not run inside a transaction.
   */
  conn: postgres.ReservedSql<{}>;
  store: ObjectStore;
  job: Readonly<ImportJob>;
  /** Where the run's staged rows, merge table and rejected rows are (staging.ts). */
  staging: Staging;
  batchSize: number;
  mergeConcurrency: number;
  /** Whether the run records rejected rows and writes their report (REJECTED_ROWS_REPORT). */
  report: boolean;
  /** How long a report is kept, in days (REJECTED_ROWS_RETENTION_DAYS). */
  reportRetentionDays: number;
  log: (msg: string, fields?: object) => void;
  /**
   * Whether the run should give its place in the worker to another account's import now
   * (worker/fair-share.ts), asked at the points where stopping loses nothing: between phases after
   * the read, and between merge batches. Absent: never (the admin CLI's in-process run).
   */
  giveWay?: () => boolean;
  /**
   * Whether other imports run in this process now (worker/fair-share.ts): the read phase then lets
   * the event loop serve them after every chunk, instead of after several (their every statement
   * waits for the loop). Absent: never.
   */
  sharing?: () => boolean;
  /**
   * Whether the API is busy now (src/imports/api-load.ts): merge batches then run in paced pieces
   * (merge/batch.ts). Absent: never (the admin CLI's in-process run).
   */
  apiBusy?: () => boolean;
  /** The busy API's load and harm (ApiLoad.load): how long paced pieces rest (pace.ts). */
  apiLoad?: () => ApiLoadNow;
  /** Called after a merge batch committed brand-subscribe events (src/events/wake.ts); absent: nothing. */
  eventsCommitted?: () => void;
  /** How many times a paced piece's own time it rests after it (IMPORT_PACE; 0: never paced). */
  pace: number;
  /** The rejected-rows report written ahead during the merge (report.ts), for the finish to take. */
  reportDraft?: DraftedReport;
}

/**
 * A rejected-rows report written ahead (report.ts's ReportDraft), as the pipeline carries it from the
 * merge to the finish. Spelled here, not imported from report.ts, which needs Pipeline: the two
 * modules would import each other.
 */
export interface DraftedReport {
  /** The draft's file when it holds exactly `lines` rows (then the caller removes it); else dropped. */
  take(lines: number): Promise<ReportFile | undefined>;
  /** Stops the draft where it is and removes what it wrote. */
  discard(): Promise<void>;
}

/** A report in a temporary file: its path, how many rows it reports, how the file was walked. */
export interface ReportFile {
  path: string;
  lines: number;
  how: 'lines' | 'parsed';
}

/**
 * The import's rejected-rows facts as committed now: the job loaded at the start of a run predates
 * a read phase of the same run.
 */
export async function loadReportFacts(sql: Sql, job: Readonly<ImportJob>): Promise<ReportFacts> {
  const [row] = await sql<ReportFacts[]>`
    select rejects_recorded as "rejectsRecorded", file_rows as "fileRows", file_linebreak as "fileLinebreak",
           object_etag as "objectEtag"
    from contact_imports where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid`;
  return row ?? { rejectsRecorded: false, fileRows: null, fileLinebreak: null, objectEtag: null };
}

export type ReportFacts = Pick<ImportJob, 'rejectsRecorded' | 'fileRows' | 'fileLinebreak' | 'objectEtag'>;

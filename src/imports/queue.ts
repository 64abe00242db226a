export type EnsureOutcome = 'live' | 'closed' | 'added' | 'replaced';

/** What the API and the sweeper need of the job queue. */
export interface ImportQueue {
  /** Adds the import's job; a no-op while a job for it exists (the job id is the import id). */
  enqueueImport(accountId: string, importId: string): Promise<void>;
  /**
   * Makes sure a job will run the import: adds one when Redis has none, or replaces one that has
   * finished or failed. `stillOpen` is asked (after the job state was read) before adding, so an
   * import that finished in the meantime is left alone. Returns what it did.
   */
  ensureImport(accountId: string, importId: string, stillOpen: () => Promise<boolean>): Promise<EnsureOutcome>;
  ping(): Promise<unknown>;
  close(): Promise<void>;
}

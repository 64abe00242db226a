/** What the API needs of the job queue: enqueue an import, and a readiness ping. */
export interface ImportQueue {
  enqueueImport(accountId: string, importId: string): Promise<void>;
  ping(): Promise<unknown>;
  close(): Promise<void>;
}

/** How long a claim on an export holds without renewal: a dead worker's export is taken over after this. */
export const EXPORT_LEASE_SECONDS = 15;
/** Rows a second assumed before a run has shown its own pace (bench/findings/2026-11-28-export-1m-5m.md: more). */
const ROWS_PER_SECOND = 200_000;
const MAX_S = 24 * 3600;

export interface OpenExport {
  status: 'queued' | 'exporting';
  started_at: Date | null;
  rows_expected: string | number | null;
  rows_written: string | number;
}

/**
 * Whole seconds until the account's open export ends, at least 1. An exporting run is extrapolated
 * from its own pace; before that is known, from the rows it expects at an assumed pace; and a queued
 * export, or one whose worker may have died, is given a lease's time for a worker to take it up.
 */
export function exportRetryAfterSeconds(open: OpenExport, now: Date): number {
  const expected = Number(open.rows_expected ?? 0);
  const written = Number(open.rows_written);
  let seconds = EXPORT_LEASE_SECONDS + expected / ROWS_PER_SECOND;
  if (open.status === 'exporting' && open.started_at && written > 0 && expected > written) {
    const elapsed = (now.getTime() - open.started_at.getTime()) / 1000;
    seconds = (elapsed * (expected - written)) / written;
  }
  return Math.min(MAX_S, Math.max(1, Math.ceil(seconds)));
}

import { STALLED_CHECK_MS, STALLED_RESUME_MS, SWEEP_EVERY_MS } from './jobs';

/** An import stays `awaiting-upload` at most this long before the sweeper fails it. */
export const UPLOAD_DEADLINE_MS = 24 * 3600 * 1000;
/** The upload must start within this window (the spec's `uploadExpiresAt`). */
export const UPLOAD_WINDOW_MS = 3600 * 1000;

/**
 * Rough import throughput for estimates: about 20,000 rows of ~200 bytes a second. Tune it from the
 * bench results; it only shapes Retry-After, never correctness.
 */
const BYTES_PER_SECOND = 4 * 1024 * 1024;
/** Merge speed assumed before a merge has timed any batch of its own (the same 20,000 rows a second). */
export const MERGE_ROWS_PER_SECOND = 20_000;
const SWEEP_SLACK_S = Math.ceil(SWEEP_EVERY_MS / 1000);
const STALLED_RESUME_S = STALLED_RESUME_MS / 1000;
const STALLED_CHECK_S = Math.ceil(STALLED_CHECK_MS / 1000);
const MAX_S = UPLOAD_DEADLINE_MS / 1000;

const clamp = (seconds: number) => Math.min(MAX_S, Math.max(1, Math.ceil(seconds)));

/**
 * Seconds until an import that is past its own estimate ends. Past the estimate it is either
 * slower than extrapolated or its worker died, and from PostgreSQL alone the two look the same
 * (a dead worker moves nothing). So the answer assumes the worse: the worker died at the last
 * sign of progress, BullMQ hands the job to another worker at most STALLED_RESUME_MS after that,
 * and then `workSeconds` of work remain. Never less than one stalled-job check: "ask again very
 * soon" (1 s) would be a promise nobody keeps.
 *
 * @param quietSeconds since the import last committed progress (0 when unknown: the worst case)
 */
export function overdueImportSeconds(quietSeconds: number, workSeconds: number): number {
  const pickUp = Math.max(0, STALLED_RESUME_S - Math.max(0, quietSeconds));
  return clamp(Math.max(STALLED_CHECK_S, pickUp + Math.max(0, workSeconds)));
}

/** A contact import's merge as the single-write guard sees it: its bulk_operations row and import row. */
export interface RunningMerge {
  /** Seconds until bulk_operations.estimated_end, which every merge batch moves; negative once passed. */
  secondsToEstimate: number;
  /** Seconds since contact_imports.updated_at, which every merge batch moves. */
  quietSeconds: number;
  /** Seconds from the merge's start (bulk_operations.started_at) to its last progress. */
  activeSeconds: number;
  checkpoint: number;
  rowCount: number;
}

/**
 * Retry-After of a single contact write refused while an import merges (src/contacts/write-guard.ts).
 * While the merge keeps its estimate ahead of now, that estimate (extrapolated by the worker from
 * its own batches). Once the estimate has passed, overdueImportSeconds with the rows left at the
 * speed this merge has shown so far (time lost to an earlier stall included, so it leans long).
 */
export function mergeRetryAfterSeconds(m: RunningMerge): number {
  if (m.secondsToEstimate >= 1) return clamp(m.secondsToEstimate);
  const rowsPerSecond =
    m.checkpoint > 0 && m.activeSeconds > 0 ? m.checkpoint / m.activeSeconds : MERGE_ROWS_PER_SECOND;
  return overdueImportSeconds(m.quietSeconds, Math.max(0, m.rowCount - m.checkpoint) / rowsPerSecond);
}

export interface OpenImport {
  status: 'awaiting-upload' | 'uploaded' | 'importing';
  created_at: Date;
  started_at: Date | null;
  object_size: number | null;
  percent_complete: number | null;
  /** When the import last committed progress (an overdue import's worker may have died then). */
  updated_at: Date | null;
}

/**
 * Whole seconds until the open import could stop blocking, at least 1 and at most a day.
 * - awaiting-upload: nothing but a file arriving or the 24-hour deadline ends it. The deadline is
 *   the one time we can promise; a file arriving only starts an import that then takes a while.
 * - uploaded: the time to import a file of its size.
 * - importing: extrapolated from the share done so far, or from the size while it is still 0%;
 *   once past that estimate (or finishing its last batch), overdueImportSeconds: its worker may
 *   have died, and a stalled job waits to be picked up again before its work goes on.
 */
export function retryAfterSeconds(open: OpenImport, now: Date): number {
  const ms = now.getTime();
  let seconds: number;
  const sizeEstimate = (open.object_size ?? 0) / BYTES_PER_SECOND + SWEEP_SLACK_S;
  if (open.status === 'awaiting-upload') {
    seconds = (open.created_at.getTime() + UPLOAD_DEADLINE_MS - ms) / 1000 + SWEEP_SLACK_S;
  } else if (open.status === 'uploaded' || !open.started_at) {
    seconds = sizeEstimate;
  } else {
    const elapsed = (ms - open.started_at.getTime()) / 1000;
    const p = open.percent_complete ?? 0;
    seconds = p > 0 && p < 100 ? (elapsed * (100 - p)) / p : sizeEstimate - elapsed;
    if (seconds < SWEEP_SLACK_S) {
      const quiet = open.updated_at ? (ms - open.updated_at.getTime()) / 1000 : 0;
      return overdueImportSeconds(quiet, SWEEP_SLACK_S);
    }
  }
  return clamp(seconds);
}

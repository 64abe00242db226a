import { SWEEP_EVERY_MS } from './jobs';

/** An import stays `awaiting-upload` at most this long before the sweeper fails it. */
export const UPLOAD_DEADLINE_MS = 24 * 3600 * 1000;
/** The upload must start within this window (the spec's `uploadExpiresAt`). */
export const UPLOAD_WINDOW_MS = 3600 * 1000;

/**
 * Rough import throughput for estimates: about 20,000 rows of ~200 bytes a second. Tune it from the
 * bench results; it only shapes Retry-After, never correctness.
 */
const BYTES_PER_SECOND = 4 * 1024 * 1024;
const SWEEP_SLACK_S = Math.ceil(SWEEP_EVERY_MS / 1000);

export interface OpenImport {
  status: 'awaiting-upload' | 'uploaded' | 'importing';
  created_at: Date;
  started_at: Date | null;
  object_size: number | null;
  percent_complete: number | null;
}

/**
 * Whole seconds until the open import could stop blocking, at least 1 and at most a day.
 * - awaiting-upload: nothing but a file arriving or the 24-hour deadline ends it. The deadline is
 *   the one time we can promise; a file arriving only starts an import that then takes a while.
 * - uploaded: the time to import a file of its size.
 * - importing: extrapolated from the share done so far, or from the size while it is still 0%.
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
    // Past the estimate, or finishing its last batch: ask again soon rather than claim it is done.
    if (seconds < SWEEP_SLACK_S) seconds = SWEEP_SLACK_S;
  }
  return Math.min(UPLOAD_DEADLINE_MS / 1000, Math.max(1, Math.ceil(seconds)));
}

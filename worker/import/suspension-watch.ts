import { isSuspended } from '../../src/auth/suspension';
import type { Sql } from '../../src/db';

/** How often a running import looks whether its account was suspended: one primary-key read. */
export const SUSPENSION_LOOK_MS = 1_000;

export interface SuspensionWatch {
  /** Whether the account was suspended at the last look. */
  suspended(): boolean;
  stop(): void;
}

/**
 * Looks, while an import runs, whether its account was suspended, for the pipeline's checkpoints
 * to ask without a query of their own (Pipeline.giveWay is asked synchronously, between merge
 * batches). A look that fails changes nothing: the run's own statements meet the same fault.
 */
export function watchSuspension(sql: Sql, accountId: string, everyMs = SUSPENSION_LOOK_MS): SuspensionWatch {
  let suspended = false;
  const timer = setInterval(() => {
    isSuspended(sql, accountId)
      .then((now) => {
        suspended = now;
      })
      .catch(() => {});
  }, everyMs);
  timer.unref?.();
  return { suspended: () => suspended, stop: () => clearInterval(timer) };
}

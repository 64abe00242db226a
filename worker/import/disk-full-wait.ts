import { diskFullCause } from '../../src/storage/disk-full';

/**
 * How long one delivery of an import's job waits for a full disk (PostgreSQL's, the object store's,
 * the worker's temporary files) to get space again, trying the import again from its last commit
 * now and then, before it gives the job back to the queue's retries. Space comes back when an
 * operator frees it, which takes minutes rather than a restart's seconds; the queue's backoff would
 * leave the import idle for up to twenty minutes after that, this wait for at most MAX_PAUSE_MS.
 */
export const DISK_FULL_WAIT_MS = 10 * 60_000;
/** The longest pause between two tries: the time from freed space to the import moving on again. */
const MAX_PAUSE_MS = 5_000;

/**
 * The pause after a full-disk failure (`error`, src/storage/disk-full.ts) before the import is tried
 * again: 0.5 s doubling to MAX_PAUSE_MS while the wait that began at the first such failure of this
 * delivery lasts. Past DISK_FULL_WAIT_MS it throws the failure with its cause named first: the
 * failure reason the queue's last retry records (worker/index.ts) says which disk was full.
 */
export async function diskFullWait(error: unknown, startedAt: number, tries: number): Promise<void> {
  if (Date.now() - startedAt >= DISK_FULL_WAIT_MS) {
    const message = error instanceof Error ? error.message : String(error);
    const named = new Error(`${diskFullCause(error)}: ${message}`, { cause: error });
    throw Object.assign(named, { code: (error as { code?: unknown }).code });
  }
  await Bun.sleep(Math.min(MAX_PAUSE_MS, 500 * 2 ** tries));
}

/**
 * How the imports of different accounts share one worker process (issue 19).
 *
 * A worker takes up to WORKER_CONCURRENCY imports at once (each of a different account: an account
 * has one open import at a time) and runs them side by side, so a small import taken beside a large
 * one ends in seconds: the CPU and the database are shared as they go, not in turns. That is the
 * measured choice: a 25M-row import spends minutes in phases that cannot stop midway (its read is
 * one pass over the file, its dedupe one statement per part), so turns taken at checkpoints alone
 * would leave a small import waiting for minutes.
 *
 * When every place is taken and another account's import has waited in the queue for PATIENCE_MS,
 * an import of this process that has run at least SLICE_MS since it started here gives its place up
 * at its next safe point: between two phases after the read, or between two merge batches, where
 * everything it did is committed. Its job goes to the back of the queue, and the run that takes it
 * up again resumes from that checkpoint. So no account waits on others for longer than their
 * imports take to reach such a point, and imports beyond the places take turns of SLICE_MS or more.
 * A burst of small imports that the free places clear within PATIENCE_MS moves nobody.
 */
import { log } from '../src/log';

/** The least an import runs in a place before it may be asked to give it up. */
export const SLICE_MS = 5_000;
/** How long the longest-waiting import waits before a running one gives way to it. */
export const PATIENCE_MS = 2_000;
/** How often the queue is looked at while every place is taken. */
const POLL_MS = 1_000;

export class FairShare {
  /** import id → when its current run started in this process */
  private readonly running = new Map<string, number>();
  /** How long the longest-waiting job had waited at the last look (0: none waits). */
  private waitedMs = 0;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly places: number,
    /** how long the longest-waiting job of the queue (taken by no worker) has waited; 0 when none */
    private readonly longestWaitMs: () => Promise<number>,
  ) {}

  /** A run of `importId` starts; call the returned function when it ends, however it ends. */
  enter(importId: string): () => void {
    this.running.set(importId, Date.now());
    this.watch();
    return () => {
      this.running.delete(importId);
      this.watch();
    };
  }

  /** Whether an import runs in this process (the webhook relay gives way to it: worker/events/relay.ts). */
  importing(): boolean {
    return this.running.size > 0;
  }

  /** Pipeline.sharing: more than one import runs in this process. */
  sharing(): boolean {
    return this.running.size > 1;
  }

  /** Pipeline.giveWay for a run of `importId`. */
  giveWay(importId: string): boolean {
    if (this.waitedMs < PATIENCE_MS || this.running.size < this.places) return false;
    const since = this.running.get(importId);
    if (since === undefined || Date.now() - since < SLICE_MS) return false;
    // One place per look at the queue: the next look says whether an import still waits.
    this.waitedMs = 0;
    log('info', 'import gives its place to a waiting import', { importId, ranMs: Date.now() - since });
    return true;
  }

  /** Counts waiting jobs only while every place is taken: otherwise a waiting job is taken anyway. */
  private watch(): void {
    const full = this.running.size >= this.places;
    if (full && !this.timer) {
      this.timer = setInterval(() => void this.poll(), POLL_MS);
      this.timer.unref?.();
      void this.poll();
    } else if (!full && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
      this.waitedMs = 0;
    }
  }

  private async poll(): Promise<void> {
    try {
      this.waitedMs = await this.longestWaitMs();
    } catch (e) {
      // Redis away: no job can be taken anyway; every run keeps its place.
      this.waitedMs = 0;
      log('debug', 'could not look at the waiting imports', { error: String(e) });
    }
  }
}

/**
 * How an import gives the API room while the API is busy (src/imports/api-load.ts): its work goes
 * in small pieces, each followed by a rest of IMPORT_PACE times the piece's own time, so the API's
 * requests find a free core (and, in the merge, an idle WAL) most of the time. One rule for every
 * phase: the read's parsed chunks with their COPY (read.ts), the dedupe's slices (dedupe.ts), the
 * merge batches (merge/batch.ts) and the scan for the report's duplicate rows beside them
 * (rejects.ts). While the API is not busy nothing rests: an import on an idle API runs at full speed.
 * How long a piece rests follows the API's load and the harm it takes (restFactor): an API whose
 * answers are no slower than usual takes no rest from the import, a slowed one a rest that grows
 * with its slowdown, up to what its load leaves (a light load a short rest, a saturated API the full
 * IMPORT_PACE).
 */
import type { ApiLoadNow } from '../../src/imports/api-load';

export interface PaceSource {
  /** Whether the API is busy now (Pipeline.apiBusy); absent: never. */
  apiBusy?: () => boolean;
  /** How many times a paced piece's own time it rests after it (IMPORT_PACE; 0: never paced), at most. */
  pace: number;
  /** The busy API's load and harm (ApiLoad.load); absent: fully loaded, harm unknown. */
  apiLoad?: () => ApiLoadNow;
}

/**
 * The API's harm (its mean time per request over its usual level) up to which an import does not
 * rest, and from which it rests all its load leaves. Between them the rest grows in proportion, so
 * the import settles where the API's answers are between 1.5 and 3 times their usual time on
 * average: the mixed step's target is its p50 and p99 within 2 × idle.
 */
export const HARM_FROM = 1.5;
export const HARM_FULL = 3;

/**
 * Times a paced piece's own time it rests: the import's share of the time (piece / (piece + rest))
 * is what the API's load leaves, 1 - share, so rest / piece = share / (1 - share), at most `pace`
 * (reached at share pace / (1 + pace), 0.8 for the default 4); times the harm's weight, 0 up to
 * HARM_FROM and 1 from HARM_FULL. Without a load, `pace`; without a harm, the load's rest in full.
 */
export function restFactor(pace: number, load: ApiLoadNow | undefined): number {
  if (load === undefined) return pace;
  const s = Math.min(Math.max(load.share, 0), 1);
  const byLoad = s >= 1 ? pace : Math.min(pace, s / (1 - s));
  if (load.harm === undefined) return byLoad;
  const weight = Math.min(Math.max((load.harm - HARM_FROM) / (HARM_FULL - HARM_FROM), 0), 1);
  return byLoad * weight;
}

/** One run's pieces: asks whether the next should be paced, and rests after those that were. */
export class Pacer {
  /** paced pieces run so far */
  pieces = 0;
  /** milliseconds rested after them */
  restedMs = 0;

  constructor(
    private readonly source: PaceSource,
    private readonly turn?: PaceTurn,
  ) {}

  /** Whether the API is busy now: the next piece should be a small one, rested after. */
  busy(): boolean {
    return this.source.pace > 0 && this.source.apiBusy?.() === true;
  }

  /**
   * Runs one piece, and when it was `paced` rests `pace` times its time after it; a paced piece
   * waits for the pacer's turn, when it has one, and holds it through its rest.
   */
  async piece<T>(paced: boolean, run: () => Promise<T>): Promise<T> {
    const once = async () => {
      const started = performance.now();
      const result = await run();
      if (paced) await this.restAfter(started);
      return result;
    };
    return paced && this.turn ? this.turn.take(once) : once();
  }

  /**
   * Rests `pace` times the time since `started` (performance.now() when the piece began): for a
   * piece that is not one promise, such as a parsed chunk whose rows the COPY has just taken.
   */
  async restAfter(started: number): Promise<void> {
    const factor = restFactor(this.source.pace, this.source.apiLoad?.());
    const rest = Math.round((performance.now() - started) * factor);
    this.pieces++;
    this.restedMs += rest;
    await Bun.sleep(rest);
  }
}

/**
 * Pieces that would run side by side, each on a backend of its own (the dedupe's parts), go one at
 * a time while the API is busy, each rested after: two at once take both cores of a small box.
 * While it is not busy they run side by side as they come.
 */
export class PacedLane {
  private readonly turn = new PaceTurn();

  constructor(private readonly pacer: Pacer) {}

  run<T>(piece: () => Promise<T>): Promise<T> {
    if (!this.pacer.busy()) return piece();
    // Asked again at its turn: the load may have ended while it waited.
    return this.turn.take(() => this.pacer.piece(this.pacer.busy(), piece));
  }
}

/**
 * One paced piece and its rest at a time among the pacers that share it: a merge's batches in
 * flight, each a transaction on a backend of its own. The rest leaves the API the share of the time
 * its load asks for only if the import's pieces do not overlap it; two batches resting on their own
 * kept two backends busy half the time each, and the API's p50 at 2.2-2.8 × idle while they merged
 * (bench/findings/2026-12-06-pacing-by-harm.md).
 */
export class PaceTurn {
  private tail: Promise<unknown> = Promise.resolve();

  take<T>(piece: () => Promise<T>): Promise<T> {
    const turn = this.tail.then(piece);
    this.tail = turn.catch(() => {});
    return turn;
  }
}

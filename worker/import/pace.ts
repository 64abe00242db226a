/**
 * How an import gives the API room while the API is busy (src/imports/api-load.ts): its work goes
 * in small pieces, each followed by a rest of IMPORT_PACE times the piece's own time, so the API's
 * requests find a free core (and, in the merge, an idle WAL) most of the time. One rule for every
 * phase: the read's parsed chunks with their COPY (read.ts), the dedupe's slices (dedupe.ts), the
 * merge batches (merge/batch.ts) and the scan for the report's duplicate rows beside them
 * (rejects.ts). While the API is not busy nothing rests: an import on an idle API runs at full speed.
 * How long a piece rests follows the API's load (restFactor): a light load takes a short rest, a
 * saturated API the full IMPORT_PACE.
 */
export interface PaceSource {
  /** Whether the API is busy now (Pipeline.apiBusy); absent: never. */
  apiBusy?: () => boolean;
  /** How many times a paced piece's own time it rests after it (IMPORT_PACE; 0: never paced), at most. */
  pace: number;
  /** The busy API's load, 0-1 (ApiLoad.share: its requests in flight as a share of saturation); absent: 1. */
  apiShare?: () => number;
}

/**
 * Times a paced piece's own time it rests: the import's share of the time (piece / (piece + rest))
 * is what the API's load leaves, 1 - share, so rest / piece = share / (1 - share), at most `pace`
 * (reached at share pace / (1 + pace), 0.8 for the default 4). Without a share, `pace`.
 */
export function restFactor(pace: number, share: number | undefined): number {
  if (share === undefined) return pace;
  const s = Math.min(Math.max(share, 0), 1);
  return s >= 1 ? pace : Math.min(pace, s / (1 - s));
}

/** One run's pieces: asks whether the next should be paced, and rests after those that were. */
export class Pacer {
  /** paced pieces run so far */
  pieces = 0;
  /** milliseconds rested after them */
  restedMs = 0;

  constructor(private readonly source: PaceSource) {}

  /** Whether the API is busy now: the next piece should be a small one, rested after. */
  busy(): boolean {
    return this.source.pace > 0 && this.source.apiBusy?.() === true;
  }

  /** Runs one piece, and when it was `paced` rests `pace` times its time after it. */
  async piece<T>(paced: boolean, run: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const result = await run();
    if (paced) await this.restAfter(started);
    return result;
  }

  /**
   * Rests `pace` times the time since `started` (performance.now() when the piece began): for a
   * piece that is not one promise, such as a parsed chunk whose rows the COPY has just taken.
   */
  async restAfter(started: number): Promise<void> {
    const factor = restFactor(this.source.pace, this.source.apiShare?.());
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
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly pacer: Pacer) {}

  run<T>(piece: () => Promise<T>): Promise<T> {
    if (!this.pacer.busy()) return piece();
    // Asked again at its turn: the load may have ended while it waited.
    const turn = this.tail.then(() => this.pacer.piece(this.pacer.busy(), piece));
    this.tail = turn.catch(() => {});
    return turn;
  }
}

/**
 * How the merge phase gives the API room while the API is busy (src/imports/api-load.ts): its
 * database work goes in small pieces, each followed by a rest of IMPORT_PACE times the piece's own
 * time, so the API's requests find a free core and an idle WAL most of the time. One rule for all
 * that runs in the merge phase: the merge batches (merge/batch.ts) and the scan for the report's
 * duplicate rows beside them (rejects.ts).
 */
export interface PaceSource {
  /** Whether the API is busy now (Pipeline.apiBusy); absent: never. */
  apiBusy?: () => boolean;
  /** How many times a paced piece's own time it rests after it (IMPORT_PACE; 0: never paced). */
  pace: number;
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
    if (paced) {
      const rest = Math.round((performance.now() - started) * this.source.pace);
      this.pieces++;
      this.restedMs += rest;
      await Bun.sleep(rest);
    }
    return result;
  }
}

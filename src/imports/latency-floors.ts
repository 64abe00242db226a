/**
 * An API process's usual time per request at each request rate, for the busy signal's harm
 * (api-load.ts): how much slower than usual its answers are now. Usual is per rate because a
 * busier API answers more slowly by itself: the first form, one floor for every rate, read an idle
 * API at half its capacity as 1.3-1.8 × slowed against the floor its quiet moments had set, and
 * made an import rest as if the API were harmed (bench/findings/2026-12-06-pacing-by-harm.md).
 *
 * The rates go in buckets a quarter apart. Each bucket keeps the lowest smoothed time per request
 * it has seen, which rises by itself (doubling in FLOOR_DOUBLING_MS) so that a lasting change in the
 * requests' mix becomes the new usual, slowly enough that an import's own slowdown of minutes never
 * does.
 */

/** Rates within this factor of each other share a floor. */
const BUCKET_RATIO = 1.25;
/** How long a floor that is not met again takes to double. */
const FLOOR_DOUBLING_MS = 600_000;

interface Floor {
  ms: number;
  at: number;
}

export class LatencyFloors {
  private readonly floors = new Map<number, Floor>();

  /** `ms` per request was seen at `rate` requests a second at time `now` (ms): it may lower that rate's floor. */
  see(rate: number, ms: number, now: number): void {
    const bucket = bucketOf(rate);
    const floor = this.floors.get(bucket);
    if (floor === undefined || ms <= risen(floor, now)) this.floors.set(bucket, { ms, at: now });
  }

  /**
   * How many times its usual time `ms` per request is at `rate`: against that rate's floor, or, for
   * a rate never seen, the floor of the nearest rate below it (a lower rate answers faster, so the
   * figure errs towards harm), or above it when there is none below; 1 with no floor at all.
   */
  harm(rate: number, ms: number, now: number): number {
    const floor = this.nearest(bucketOf(rate));
    return floor === undefined || floor.ms <= 0 ? 1 : Math.max(1, ms / risen(floor, now));
  }

  private nearest(bucket: number): Floor | undefined {
    const own = this.floors.get(bucket);
    if (own) return own;
    const buckets = [...this.floors.keys()];
    const below = buckets.filter((b) => b < bucket);
    if (below.length > 0) return this.floors.get(Math.max(...below));
    return buckets.length > 0 ? this.floors.get(Math.min(...buckets)) : undefined;
  }
}

function bucketOf(rate: number): number {
  return rate < 1 ? -1 : Math.floor(Math.log(rate) / Math.log(BUCKET_RATIO));
}

function risen(floor: Floor, now: number): number {
  return floor.ms * 2 ** ((now - floor.at) / FLOOR_DOUBLING_MS);
}

/**
 * The API's usual time per request at each rate (src/imports/latency-floors.ts), against which the
 * busy signal's harm is measured: a busier API is slower by itself, and that is no harm.
 */
import { describe, expect, test } from 'bun:test';
import { LatencyFloors } from '../../src/imports/latency-floors';

const MIN = 60_000;

describe('the usual time per request at each rate', () => {
  test('a busier API’s own slowness is no harm; a slowdown at the same rate is', () => {
    const floors = new LatencyFloors();
    floors.see(100, 1, 0);
    floors.see(4_000, 2, 0);
    // At 4,000 requests a second, 2 ms is usual there, though twice the quiet API's time.
    expect(floors.harm(4_000, 2, 1_000)).toBe(1);
    expect(floors.harm(4_100, 6, 1_000)).toBeCloseTo(3, 2);
    expect(floors.harm(100, 2, 1_000)).toBeCloseTo(2, 2);
  });

  test('the floor is the lowest time seen, never above it', () => {
    const floors = new LatencyFloors();
    floors.see(1_000, 3, 0);
    floors.see(1_000, 2, 10);
    floors.see(1_000, 5, 20);
    expect(floors.harm(1_000, 4, 30)).toBeCloseTo(2, 2);
    expect(floors.harm(1_000, 1, 30)).toBe(1);
  });

  test('a rate never seen is judged against the nearest rate below it, or above when none is below', () => {
    const floors = new LatencyFloors();
    floors.see(500, 1, 0);
    floors.see(2_000, 2, 0);
    expect(floors.harm(1_200, 4, 0)).toBeCloseTo(4, 2);
    expect(floors.harm(8_000, 4, 0)).toBeCloseTo(2, 2);
    expect(floors.harm(50, 4, 0)).toBeCloseTo(4, 2);
    expect(new LatencyFloors().harm(1_000, 40, 0)).toBe(1);
  });

  test('a floor not met again doubles in ten minutes: a lasting change becomes usual, an import’s minutes not', () => {
    const floors = new LatencyFloors();
    floors.see(1_000, 2, 0);
    expect(floors.harm(1_000, 6, 2 * MIN)).toBeGreaterThan(2.5);
    expect(floors.harm(1_000, 6, 10 * MIN)).toBeCloseTo(1.5, 2);
    expect(floors.harm(1_000, 6, 30 * MIN)).toBe(1);
    // Seen again below its risen level, it starts over from there.
    floors.see(1_000, 3, 30 * MIN);
    expect(floors.harm(1_000, 6, 30 * MIN)).toBeCloseTo(2, 2);
  });
});

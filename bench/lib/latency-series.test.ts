// The export step's windows and the line that compares a span's first quarter with its last: where a
// long span's tail came from rests on these (no database needed).
import { describe, expect, test } from 'bun:test';
import { driftSummary, LatencySeries, quietWindow, type SeriesWindow } from './latency-series';

describe('LatencySeries', () => {
  test('each answer in the window of its send time; none before the span began', () => {
    const s = new LatencySeries(10);
    s.begin(1000);
    s.add(500, 99); // sent before the span
    for (let k = 0; k < 100; k++) s.add(1000 + k, k < 99 ? 2 : 40);
    s.add(1000 + 10_000, 5);
    const [first, second] = s.windows();
    expect(first).toMatchObject({ at: 0, requests: 100, max: 40 });
    expect(first!.p50).toBeCloseTo(2.1, 5);
    expect(first!.p99).toBeCloseTo(2.1, 5);
    expect(second).toMatchObject({ at: 10, requests: 1, max: 5 });
  });
});

describe('driftSummary', () => {
  const window = (at: number, requests: number, p99: number, api: number, steal: number): SeriesWindow => ({
    at,
    requests,
    p99,
    max: p99,
    system: { ...quietWindow(), cpuSeconds: { api }, stealSeconds: steal },
  });

  test('the first quarter beside the last: answers a second, median p99, CPU µs per answer, steal', () => {
    const ws = [
      window(0, 1000, 5, 0.1, 0),
      window(10, 1000, 6, 0.1, 0),
      window(20, 1000, 7, 0.1, 0),
      window(30, 1000, 8, 0.1, 0),
      window(40, 500, 20, 0.1, 1),
      window(50, 500, 30, 0.1, 1),
      window(60, 500, 40, 0.1, 1),
      window(70, 500, 50, 0.1, 1),
    ];
    expect(driftSummary(ws, 10)).toBe(
      'first 2 windows: 100 answers/s, median window p99 5.0 ms, CPU µs per answer api 100, steal 0.00 s/s; ' +
        'last 2: 50 answers/s, median window p99 40.0 ms, CPU µs per answer api 200, steal 0.10 s/s',
    );
  });

  test('nothing to compare under four windows with answers', () => {
    expect(driftSummary([window(0, 10, 1, 0, 0), window(10, 0, 0, 0, 0)], 10)).toBeUndefined();
  });
});

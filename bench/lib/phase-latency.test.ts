// The mixed step's verdicts rest on these: an answer counts in the phase its request was sent in,
// and a p99 is exactly the nearest-rank value of the answers counted (no database needed).
import { describe, expect, test } from 'bun:test';
import { bracketP99, inPhaseOrder, percentile, PhaseLoad, PhaseTimeline, Samples } from './phase-latency';

describe('percentile', () => {
  test('nearest rank: the smallest value with at least p % at or below it', () => {
    const hundred = Float64Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(hundred, 50)).toBe(50);
    expect(percentile(hundred, 99)).toBe(99);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([1, 2, 3], 50)).toBe(2);
    expect(percentile([], 99)).toBeUndefined();
  });

  test('where p % of the count is whole, the value at that rank, not the next', () => {
    const values = Float64Array.from({ length: 1000 }, (_, i) => i + 1);
    expect(percentile(values, 99)).toBe(990);
    expect(percentile(values.subarray(0, 1001 - 1), 50)).toBe(500);
    expect(
      percentile(
        Float64Array.from({ length: 1001 }, (_, i) => i + 1),
        99,
      ),
    ).toBe(991);
  });

  test('under 100 answers the p99 is the slowest one', () => {
    expect(percentile([1, 2, 3, 4, 50], 99)).toBe(50);
  });
});

describe('Samples', () => {
  test('keeps every value in order as it grows past its first block', () => {
    const s = new Samples();
    for (let i = 0; i < 5000; i++) s.push(i / 2);
    expect(s.length).toBe(5000);
    expect(s.values()[0]).toBe(0);
    expect(s.values()[4999]).toBe(2499.5);
  });
});

describe('PhaseTimeline', () => {
  const timeline = () => {
    const t = new PhaseTimeline('uploaded', 1000);
    t.mark('read', 1100);
    t.mark('read', 1500); // the same phase seen again is no new mark
    t.mark('dedupe', 3100);
    t.mark('merge', 4100);
    t.mark('finish', 6100);
    t.mark('success', 6200);
    return t;
  };

  test('the phase at a time is the last one marked at or before it', () => {
    const t = timeline();
    expect(t.phaseAt(1000)).toBe('uploaded');
    expect(t.phaseAt(1099.9)).toBe('uploaded');
    expect(t.phaseAt(1100)).toBe('read');
    expect(t.phaseAt(3099)).toBe('read');
    expect(t.phaseAt(5000)).toBe('merge');
    expect(t.phaseAt(6150)).toBe('finish');
    expect(t.phaseAt(9000)).toBe('success');
    expect(t.phaseAt(10)).toBe('uploaded'); // before the first mark: the first phase
  });

  test('seconds per phase, the last mark only closing the one before', () => {
    expect(Object.fromEntries(timeline().seconds())).toEqual({
      uploaded: 0.1,
      read: 2,
      dedupe: 1,
      merge: 2,
      finish: 0.1,
    });
  });

  test('a phase seen twice adds up its spans', () => {
    const t = new PhaseTimeline('read', 0);
    t.mark('merge', 1000);
    t.mark('read', 3000);
    t.mark('end', 3500);
    expect(Object.fromEntries(t.seconds())).toEqual({ read: 1.5, merge: 2 });
  });
});

describe('PhaseLoad', () => {
  test("an answer counts in its request's send phase, not its arrival phase", () => {
    const t = new PhaseTimeline('read', 0);
    t.mark('merge', 1000);
    t.mark('success', 2000);
    const l = new PhaseLoad(t);
    l.response(1050, 100, 200); // sent at 950: read
    l.response(1050, 40, 200); // sent at 1010: merge
    l.response(2500, 600, 503); // sent at 1900: merge, not 2xx
    l.response(2100, 10, 200); // sent after success: in no import phase
    l.error(1500);
    expect(l.figures(['read'], 1)).toEqual({ requests: 1, reqPerSec: 1, p50: 100, p99: 100, non2xx: 0, errors: 0 });
    expect(l.figures(['merge'], 1)).toEqual({ requests: 2, reqPerSec: 1, p50: 40, p99: 600, non2xx: 1, errors: 1 });
    expect(l.figures(['read', 'merge'], 2)).toMatchObject({ requests: 3, reqPerSec: 1, p50: 100, p99: 600 });
    expect(l.figures(['dedupe'], 0)).toEqual({
      requests: 0,
      reqPerSec: 0,
      p50: undefined,
      p99: undefined,
      non2xx: 0,
      errors: 0,
    });
    expect(l.faults()).toBe('merge 1 non-2xx, 1 errors');
  });

  test('percentiles over many answers are those of the sorted latencies', () => {
    const t = new PhaseTimeline('merge', 0);
    const l = new PhaseLoad(t);
    // 2,000 answers with latencies 2000, 1999, … 1: arrival order must not matter.
    for (let ms = 2000; ms >= 1; ms--) l.response(10_000, ms, 200);
    expect(l.figures(['merge'], 10)).toMatchObject({ requests: 2000, reqPerSec: 200, p50: 1000, p99: 1980 });
  });
});

test('phases sort in the order an import goes through them, unknown names last', () => {
  expect(inPhaseOrder(['merge', 'weird', 'read', 'finish', 'idle', 'read', 'dedupe'])).toEqual([
    'idle',
    'read',
    'dedupe',
    'merge',
    'finish',
    'weird',
  ]);
});

describe('bracketP99', () => {
  test("the mean of the idle p99s on either side: a steady drift's middle", () => {
    const figures = (p99: number) => ({ requests: 1000, reqPerSec: 100, p99, non2xx: 0, errors: 0 });
    expect(bracketP99(figures(8), figures(12))).toBe(10);
    expect(bracketP99({ ...figures(8), p99: undefined }, figures(12))).toBeNaN();
  });
});

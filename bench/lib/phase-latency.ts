/**
 * The mixed step's figures: every answer of a load counted in the import phase that was current when
 * its request was sent, and exact percentiles of each phase's latencies. No histogram: a phase with
 * few requests (`finish`) must show what those requests took, and the ratio of two p99s should not
 * carry a histogram's rounding.
 */

/** The order phases are shown in: the idle load, then an import's states as it goes through them. */
export const PHASE_ORDER = ['idle', 'uploaded', 'starting', 'read', 'dedupe', 'merge', 'finish'];

/** Sorts phase names in PHASE_ORDER; a name it does not know goes after, in the order given. */
export function inPhaseOrder(names: Iterable<string>): string[] {
  const rank = (n: string) => (PHASE_ORDER.includes(n) ? PHASE_ORDER.indexOf(n) : PHASE_ORDER.length);
  return [...new Set(names)].sort((a, b) => rank(a) - rank(b));
}

/**
 * Phase changes as a poll saw them: each mark starts a phase at `at` (ms, performance.now()). A poll
 * every 100 ms sees a change up to 100 ms late, so a request sent just after a change counts in the
 * phase before it: the same resolution as the load table's phase seconds.
 */
export class PhaseTimeline {
  private readonly marks: { phase: string; at: number }[];

  constructor(phase: string, at: number) {
    this.marks = [{ phase, at }];
  }

  mark(phase: string, at: number): void {
    if (this.marks.at(-1)!.phase !== phase) this.marks.push({ phase, at });
  }

  /** The phase current at `t`: the last mark at or before it (the first phase for an earlier `t`). */
  phaseAt(t: number): string {
    // From the end: nearly every answer belongs to the latest phase or the one before it.
    for (let k = this.marks.length - 1; k > 0; k--) if (this.marks[k]!.at <= t) return this.marks[k]!.phase;
    return this.marks[0]!.phase;
  }

  /** Each mark's phase and its start in seconds after `origin` (ms, performance.now()): a chart's time axis. */
  starts(origin: number): { phase: string; at: number }[] {
    return this.marks.map((m) => ({ phase: m.phase, at: (m.at - origin) / 1000 }));
  }

  /** Seconds in each phase, from its mark to the next; the last mark (`success`, `end`) only closes. */
  seconds(): Map<string, number> {
    const out = new Map<string, number>();
    for (let k = 0; k + 1 < this.marks.length; k++) {
      const m = this.marks[k]!;
      out.set(m.phase, (out.get(m.phase) ?? 0) + (this.marks[k + 1]!.at - m.at) / 1000);
    }
    return out;
  }
}

/** Latencies in ms without an object per answer: 10 minutes at 3,000 answers/s take about 15 MB. */
export class Samples {
  private data = new Float64Array(1024);
  length = 0;

  push(v: number): void {
    if (this.length === this.data.length) {
      const grown = new Float64Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length++] = v;
  }

  values(): Float64Array {
    return this.data.subarray(0, this.length);
  }
}

/** Nearest rank: the smallest value with at least p % of the sorted values at or below it. */
export function percentile(sorted: ArrayLike<number>, p: number): number | undefined {
  if (sorted.length === 0) return undefined;
  // The rank in integers (p * n is exact): where p % of n is whole, that value itself, not the next.
  return sorted[Math.max(1, Math.ceil((p * sorted.length) / 100)) - 1];
}

export interface Figures {
  /** answers to requests sent in the span, whatever their status */
  requests: number;
  /** 2xx answers over the span's seconds */
  reqPerSec: number;
  /** ms, exact over every answer of the span; absent when it had none */
  p50?: number;
  p99?: number;
  non2xx: number;
  errors: number;
}

/**
 * A loaded span's idle reference: the mean p99 of the idle spans just before and just after it. This
 * machine's speed moves by a third over minutes, every process at once
 * (bench/findings/2026-11-28-export-judged-against-idle-spans.md), so one idle span before a long
 * loaded one says little about the machine during it; under a steady drift the mean of the two ends
 * is the span's middle, below the tail of its slower part.
 * The export and mixed steps judge their loaded spans against it.
 */
export function bracketP99(before: Figures, after: Figures): number {
  return ((before.p99 ?? NaN) + (after.p99 ?? NaN)) / 2;
}

interface Bucket {
  latencies: Samples;
  ok: number;
  non2xx: number;
  errors: number;
}

/** One kind of request's load: its answers and errors, each in the phase of the timeline it fell in. */
export class PhaseLoad {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly timeline: PhaseTimeline) {}

  private bucket(phase: string): Bucket {
    let b = this.buckets.get(phase);
    if (!b) this.buckets.set(phase, (b = { latencies: new Samples(), ok: 0, non2xx: 0, errors: 0 }));
    return b;
  }

  /** An answer seen at `now` (ms) that took `ms`: its request was sent at `now - ms`. */
  response(now: number, ms: number, status: number): void {
    const b = this.bucket(this.timeline.phaseAt(now - ms));
    b.latencies.push(ms);
    if (status >= 200 && status < 300) b.ok++;
    else b.non2xx++;
  }

  /** A connection error or timeout is reported without its request's send time: counted where it is seen. */
  error(now: number): void {
    this.bucket(this.timeline.phaseAt(now)).errors++;
  }

  /** Non-2xx answers and errors by phase, for a failure's message: `merge 3 non-2xx, 1 errors`. */
  faults(): string {
    return [...this.buckets]
      .filter(([, b]) => b.non2xx + b.errors > 0)
      .map(([phase, b]) => `${phase} ${b.non2xx} non-2xx, ${b.errors} errors`)
      .join('; ');
  }

  /** The figures of the answers in `phases` together, over `seconds`. */
  figures(phases: readonly string[], seconds: number): Figures {
    const parts = phases.flatMap((p) => this.buckets.get(p) ?? []);
    const sorted = new Float64Array(parts.reduce((n, b) => n + b.latencies.length, 0));
    let at = 0;
    for (const b of parts) {
      sorted.set(b.latencies.values(), at);
      at += b.latencies.length;
    }
    sorted.sort();
    const ok = parts.reduce((n, b) => n + b.ok, 0);
    return {
      requests: sorted.length,
      reqPerSec: seconds > 0 ? ok / seconds : 0,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      non2xx: parts.reduce((n, b) => n + b.non2xx, 0),
      errors: parts.reduce((n, b) => n + b.errors, 0),
    };
  }
}

/**
 * The run's time budget and its progress line. Before the first step the bench plans the run: each
 * step it will take, in order, with an estimate of its seconds (stepEstimate: seconds per 1M rows
 * from the recorded runs, plus a fixed part), verification included. While it runs, one line at each
 * step's start and one every PROGRESS_EVERY_S seconds:
 *
 *   [bench] step import A (wide) 412,000/1,000,000 rows · run 0:12:31 · ETA 15:42 (in 1:07)
 *
 * The ETA is the plan's remaining estimates scaled by what the run has measured so far (runEta):
 * a machine that runs the first steps at 1.3 × their estimates is taken to run the rest so too.
 */
import type { FilePaths, ShapePaths } from './run-plan';
import type { ShapeName } from './shapes';

export interface PlannedStep {
  /** the step as the line names it: `l1`, `dba`, `import A`, `mixed` … */
  name: string;
  shape?: ShapeName;
  /** rows the step moves (its file's, or both files' for dba and pgloader) */
  rows: number;
  /** estimated seconds, verification included */
  seconds: number;
}

/**
 * Seconds per 1M rows and fixed seconds of each step, verification included, on the project's
 * 2-core machines when quiet. Imports: the 25M runs of bench/findings/2026-12-06-search-25m.md
 * (A 542 / 293 s, B 792 / 483 s, wide / narrow); dba: both files' COPY + upsert at 25M and 1M with
 * the step's checks (bench/findings/2026-12-07-default-run-25m.md: 1,253 s narrow; wide: 2,946 s
 * while file B paid the tallies' per-row trigger, and without it B 1.15 × its A at 25M,
 * bench/findings/2026-12-07-dba-wide-25m.md: about 2,000 s); pgloader on the 1M files: 82-95 s
 * narrow, 165-185 s wide (the two 2026-12-07 default runs and 2026-12-07-mixed-on-narrow.md);
 * the fixed parts from bench/findings/2026-12-06-open-loop-mixed-1m.md's 1M run.
 */
const COST: Record<string, { wide: number; narrow: number; fixed: number }> = {
  generate: { wide: 2.6, narrow: 1.2, fixed: 0 },
  l1: { wide: 2.2, narrow: 1.0, fixed: 2 },
  dba: { wide: 77, narrow: 48, fixed: 10 },
  pgloader: { wide: 170, narrow: 80, fixed: 10 },
  'import A': { wide: 22, narrow: 12, fixed: 8 },
  'import B': { wide: 32, narrow: 20, fixed: 8 },
  search: { wide: 60, narrow: 40, fixed: 60 },
};

/** The HTTP step: each kind against each server in rounds, warm-up and checks included. */
export function httpSeconds(rounds: number, seconds: number, warmup: number, servers = 3): number {
  return rounds * 3 * servers * (seconds + warmup + 1.5);
}

/**
 * The mixed step, open loop: warm-up, the capacity run and two idle spans, the import of its shape's
 * file A under the load, the wait for autovacuum (about 4 s per 1M rows) and the checks.
 */
export function mixedSeconds(rows: number, seconds: number, warmup: number, closed: boolean, shape: ShapeName): number {
  // Import A under the load against alone. The closed loop: 12-15 × at 25M (the 2-hour mixed step).
  // The open loop at half the capacity, its pieces resting in proportion to the load's share of the
  // capacity (bench/findings/2026-12-06-pacing-by-harm.md), not the step's target of 1.5 ×: 2.52 × at
  // 25M (bench/findings/2026-12-07-default-run-25m.md), 3.6-5.7 × at 1M (the same finding, and
  // 2026-12-07-default-run-1m.md): 2.5 × and about a minute.
  const alone = (COST['import A']![shape] * rows) / 1e6;
  const underLoad = closed ? 13 * alone : 2.5 * alone + 60;
  return warmup + 3 * seconds + underLoad + (4 * rows) / 1e6 + 30;
}

/** One step's estimated seconds at `rows` on `shape`; 0 for a step the table does not know. */
export function stepEstimate(name: string, shape: ShapeName, rows: number): number {
  const cost = COST[name];
  return cost ? cost.fixed + (cost[shape] * rows) / 1e6 : 0;
}

/** `1:07` (h:mm) or, with seconds, `0:12:31`. */
export function clock(seconds: number, withSeconds = false): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const mm = String(m).padStart(2, '0');
  return withSeconds ? `${h}:${mm}:${String(s % 60).padStart(2, '0')}` : `${h}:${mm}`;
}

/**
 * Plan seconds taken as on time before any step is measured: the scale starts from them, so the
 * first short steps move it by their weight in the run. Without them, a 25M run's first step (the
 * missing file B generated: 34 s against 15 planned) put its ETA at 4:30 from now for a run
 * planned at 2:00, then 2:36 after the next 27 s step; ten minutes of the plan must go by at twice
 * their estimate before the rest is taken to need 1.5 × its own.
 */
const ETA_PRIOR_S = 600;

/**
 * Seconds left in the run: the current step's and the later steps' estimates, scaled by the steps
 * done (their measured seconds over their estimates, each side with ETA_PRIOR_S added; 1 before
 * any is done, held within 0.25-4). The current step's part is what its scaled estimate has left,
 * or, once it has overrun that, what its own progress `fraction` says is left; a step that has
 * overrun without a progress line is taken to need a tenth of its time so far more, not nothing.
 */
export function runEta(
  plan: readonly PlannedStep[],
  state: { current: number; stepElapsed: number; fraction?: number; measured: readonly number[] },
): { remaining: number; scale: number } {
  const done = plan.slice(0, state.current);
  const estimated = done.reduce((t, s) => t + s.seconds, 0);
  const measured = state.measured.slice(0, state.current).reduce((t, s) => t + s, 0);
  const scale = Math.min(4, Math.max(0.25, (measured + ETA_PRIOR_S) / (estimated + ETA_PRIOR_S)));
  const step = plan[state.current];
  if (!step) return { remaining: 0, scale };
  const f = state.fraction;
  const fromProgress = f !== undefined && f > 0 ? (state.stepElapsed * (1 - Math.min(f, 1))) / f : 0;
  const overrun = f === undefined ? state.stepElapsed / 10 : 0;
  const current = Math.max(step.seconds * scale - state.stepElapsed, fromProgress, overrun, 0);
  const later = plan.slice(state.current + 1).reduce((t, s) => t + s.seconds, 0) * scale;
  return { remaining: current + later, scale };
}

/** The plan as a table: each step's estimate and the run's total. */
export function planTable(plan: readonly PlannedStep[]): string {
  const total = plan.reduce((t, s) => t + s.seconds, 0);
  const lines = plan.map(
    (s) => `  ${label(s).padEnd(28)} ${s.rows.toLocaleString('en-US').padStart(12)} rows  ${clock(s.seconds, true)}`,
  );
  return [...lines, `  ${'the run'.padEnd(28)} ${''.padStart(17)}  ${clock(total, true)}`].join('\n');
}

const label = (s: PlannedStep) => (s.shape ? `${s.name} (${s.shape})` : s.name);

/** How often the progress line is printed between a step's start and the next's. */
const PROGRESS_EVERY_S = 20;

/**
 * The running run: `step()` at each step's start (in plan order; a step not in the plan is shown
 * without moving the plan), `progress()` from the steps' own progress (format.ts's Progress), a
 * line every PROGRESS_EVERY_S seconds.
 */
export class RunClock {
  private readonly started = performance.now();
  private current = -1;
  private stepStarted = performance.now();
  private readonly measured: number[] = [];
  private fraction: number | undefined;
  private stopped = false;
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(
    private readonly plan: readonly PlannedStep[],
    private readonly log: (m: string) => void,
    private readonly now: () => number = () => Date.now(),
  ) {
    log(`[bench] plan, estimated on a quiet 2-core machine (verification included):\n${planTable(plan)}`);
    this.timer = setInterval(() => this.line(), PROGRESS_EVERY_S * 1000);
    this.timer.unref();
  }

  /** A step starts: the ones before it in the plan are done. */
  step(name: string, shape?: ShapeName): void {
    const at = this.plan.findIndex((s, k) => k > this.current && s.name === name && s.shape === shape);
    if (at >= 0) {
      const t = performance.now();
      if (this.current >= 0) this.measured[this.current] = (t - this.stepStarted) / 1000;
      for (let k = this.current + 1; k < at; k++) this.measured[k] = this.plan[k]!.seconds;
      this.current = at;
      this.stepStarted = t;
      this.fraction = undefined;
    }
    this.line(at >= 0 ? undefined : `${name}${shape ? ` (${shape})` : ''}`);
  }

  /** The current step's own progress, 0-1 (its latest progress line's). */
  progress(fraction: number): void {
    this.fraction = fraction;
  }

  /** Stops the line; the run's time against the plan's, once a step has started. */
  stop(): void {
    clearInterval(this.timer);
    if (this.current < 0 || this.stopped) return;
    this.stopped = true;
    const total = this.plan.reduce((t, s) => t + s.seconds, 0);
    const run = (performance.now() - this.started) / 1000;
    this.log(`[bench] run ${clock(run, true)} (the plan estimated ${clock(total, true)} on a quiet machine)`);
  }

  private line(other?: string): void {
    const step = this.plan[this.current];
    if (!step && !other) return;
    const stepElapsed = (performance.now() - this.stepStarted) / 1000;
    const { remaining } = runEta(this.plan, {
      current: Math.max(0, this.current),
      stepElapsed,
      fraction: this.fraction,
      measured: this.measured,
    });
    const end = new Date(this.now() + remaining * 1000).toISOString().slice(11, 16);
    const n = (x: number) => x.toLocaleString('en-US');
    // Rows done as the step's latest progress line says (`-` before it has one); its time so far.
    const done = this.fraction === undefined ? '-' : n(Math.round(this.fraction * step!.rows));
    const rows = other || !step!.rows ? '' : ` ${done}/${n(step!.rows)} rows`;
    const into = other || stepElapsed < 1 ? '' : ` (${clock(stepElapsed, true)} in)`;
    const name = other ?? label(step!);
    const run = clock((performance.now() - this.started) / 1000, true);
    this.log(`[bench] step ${name}${rows}${into} · run ${run} · ETA ${end} UTC (in ${clock(remaining)})`);
  }
}

export interface TimePlanOptions {
  rows: number;
  steps: readonly string[];
  flatRows: number;
  duration: number;
  warmup: number;
  httpRounds: number;
  mixedClosed: boolean;
  mixedShape: ShapeName;
  /**
   * servers the HTTP step measures each kind against: 2, 3 with --http-no-limits, 2 more with the
   * N-process pair (--api-processes N > 1)
   */
  httpServers?: number;
}

/**
 * The run's steps in the order bench/index.ts takes them, each with its estimate: the files to
 * generate (`cached`: a file a run before left, not generated again), each shape's L1, dba and
 * pgloader steps (before the service starts), each shape's imports (on the small files first), the
 * search step after them, then the HTTP and mixed steps. Steps off by default that the table does
 * not estimate (export, events, gzip …) are left out: the line names them when they start.
 */
export function timePlan(opts: TimePlanOptions, paths: readonly ShapePaths[], cached: (path: string) => boolean) {
  const has = (s: string) => opts.steps.includes(s);
  const plan: PlannedStep[] = [];
  const files = paths.flatMap((p) => {
    const pair = (f: FilePaths, rows: number) => [f.a, ...(f.b ? [f.b] : [])].map((path) => ({ path, rows }));
    return [...pair(p, opts.rows), ...(p.flat ? pair(p.flat, opts.flatRows) : [])].map((f) => ({
      ...f,
      shape: p.shape,
    }));
  });
  const toMake = files.filter((f) => !cached(f.path));
  if (toMake.length)
    plan.push({
      name: 'generate',
      rows: toMake.reduce((t, f) => t + f.rows, 0),
      // A shape's A and B at once on two cores (generateInChild): half the files' time one after another.
      seconds: toMake.reduce((t, f) => t + stepEstimate('generate', f.shape, f.rows), 0) / 2,
    });
  const both = (p: FilePaths, rows: number) => (p.b ? 2 : 1) * rows;
  for (const p of paths) {
    const shape = p.shape;
    if (has('l1')) plan.push({ name: 'l1', shape, rows: opts.rows, seconds: stepEstimate('l1', shape, opts.rows) });
    if (has('dba')) {
      const rows = both(p, opts.rows) + (p.flat ? both(p.flat, opts.flatRows) : 0);
      plan.push({ name: 'dba', shape, rows, seconds: stepEstimate('dba', shape, rows / (p.b ? 2 : 1)) });
    }
    if (has('pgloader')) {
      // On the small files when the run has them (shape-steps.ts).
      const [f, rows] = p.flat ? [p.flat, opts.flatRows] : [p, opts.rows];
      plan.push({ name: 'pgloader', shape, rows: both(f, rows), seconds: stepEstimate('pgloader', shape, rows) });
    }
  }
  for (const p of paths) {
    const shape = p.shape;
    if (!has('a')) break;
    const ab = (rows: number) =>
      stepEstimate('import A', shape, rows) + (has('b') && p.b ? stepEstimate('import B', shape, rows) : 0);
    if (p.flat)
      plan.push({ name: 'flat imports', shape, rows: both(p.flat, opts.flatRows), seconds: ab(opts.flatRows) });
    plan.push({ name: 'import A', shape, rows: opts.rows, seconds: stepEstimate('import A', shape, opts.rows) });
    if (has('b') && p.b)
      plan.push({ name: 'import B', shape, rows: opts.rows, seconds: stepEstimate('import B', shape, opts.rows) });
    if (has('search'))
      plan.push({ name: 'search', shape, rows: opts.rows, seconds: stepEstimate('search', shape, opts.rows) });
  }
  if (has('http'))
    plan.push({
      name: 'http',
      rows: 0,
      seconds: httpSeconds(opts.httpRounds, opts.duration, opts.warmup, opts.httpServers),
    });
  if (has('mixed'))
    plan.push({
      name: 'mixed',
      shape: opts.mixedShape,
      rows: opts.rows,
      seconds: mixedSeconds(opts.rows, opts.duration, opts.warmup, opts.mixedClosed, opts.mixedShape),
    });
  return plan;
}

let active: RunClock | undefined;

/** The run's clock, for the steps' `stepStarts` and format.ts's progress lines to reach. */
export function startRunClock(plan: readonly PlannedStep[], log: (m: string) => void): RunClock {
  active?.stop();
  return (active = new RunClock(plan, log));
}

/** A step of the running run starts (nothing without a clock: a step run on its own, a test). */
export function stepStarts(name: string, shape?: ShapeName): void {
  active?.step(name, shape);
}

/** The current step's progress, 0-1. */
export function stepProgress(fraction: number): void {
  active?.progress(fraction);
}

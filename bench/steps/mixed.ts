/**
 * Step `mixed`: what an import does to the API of other accounts on the same machine. GET, POST and
 * PATCH load on one account, the three at once, from the end of the PUT of import A of file A into
 * another, fresh account until that import is `success`, judged against idle spans at the same load
 * before and after it. File A is the narrow shape's by default (`--mixed-shape`, bench/index.ts says
 * why); its import alone earlier in the run is the time the load is judged to slow.
 *
 * By default the load is open loop at a fixed rate (lib/open-loop.ts): first a closed-loop run of
 * `--duration` seconds (autocannon, 32 connections) measures what the API serves idle, its
 * `capacity`; then each kind is offered half its capacity req/s (`--mixed-rate N`: N req/s in all,
 * split as the capacity run's kinds) through the idle span, the import and the idle span after. A
 * customer's traffic does not slow down when the API does, and half the capacity leaves the import
 * room: the import's time under it against import A's alone in the same run is the second figure.
 * `--mixed-closed` keeps the earlier form: the closed loop through every span, as much as the API
 * serves (the import then gave way 12-15 × its time alone at 25M: the step took two hours).
 *
 * Every answer counts in the import phase that was current when its request was sent
 * (phase-latency.ts), so each phase (read, dedupe, merge, finish) has its own req/s and exact p50/p99
 * per kind, and so has the whole import; the import's load is also cut into 10 s windows by send
 * time (`series`, drawn by bench/report/load-windows.ts). Targets: in each of those phases each
 * kind's p99 (and, open loop, p50) at most 2 × idle, no errors, no non-2xx answers; a phase with too
 * few requests of a kind is shown and not judged; open loop, the import at most 1.5 × its time
 * alone. Idle is the mean of the two idle spans' figures (bracketP99): the paced import lasts
 * minutes at 1M rows and more at 25M, over which this machine's speed drifts. The span after waits
 * for autovacuum to finish with the import's new rows (at most AUTOVACUUM_WAIT_S) and for its pages
 * to be written out (pagesWrittenOut): that work is the import's, not the machine's idle. Verified
 * after timing: the import's counts and contacts as import A's, and the end state the load's 2xx
 * answers promise (http.ts). The import's contacts and the load's are dropped after, so the step
 * needs disk for one more set.
 */
import type { Sql } from '../../src/db';
import { createBenchAccount, dropAccountContacts } from '../lib/account';
import type { FileMeta } from '../lib/generate';
import { preflight, type Scenario } from './http';
import type { HttpTarget } from '../lib/types';
import { runImportFlow, type ImportOptions, type PhaseSpan } from '../lib/import-flow';
import { bracketP99, inPhaseOrder, PhaseTimeline, type Figures } from '../lib/phase-latency';
import type { SeriesWindow } from '../lib/latency-series';
import { contactPool } from '../lib/baseline';
import { checkImport } from '../lib/verify';
import { checkLoad, CONNECTIONS, KINDS, SERIES_SECONDS, startLoad, type Load } from '../lib/mixed-load';
import { splitRate } from '../lib/open-loop';
import { shapeOf, SHAPES, type ShapeName } from '../lib/shapes';

/** The issue's target: an import leaves the other account's p99 (and p50) at most this many times idle. */
const P99_RATIO_TARGET = 2;
/** The issue's target: the import under the open-loop load at most this many times its time alone. */
const TIME_RATIO_TARGET = 1.5;
/** The default open-loop rate: this share of each kind's req/s in the capacity run. */
const CAPACITY_SHARE = 0.5;
/** The phases the issue judges one by one (the queue wait before the worker picks the job up is shown). */
const JUDGED_PHASES = ['read', 'dedupe', 'merge', 'finish'];
/**
 * Fewer answers of a kind in a phase and its p99 is shown but not judged: at 1,000 the p99 is the
 * 10th slowest answer; below that a few slow ones (one GC pause, one checkpoint) would make it alone.
 * The finish phase lasts about 0.1 s at 5M rows: about 100 answers of a kind.
 */
const MIN_REQUESTS = 1000;
/** How long the idle span after the import waits at most for autovacuum to finish with its rows. */
const AUTOVACUUM_WAIT_S = 300;

export interface MixedFigures extends Figures {
  scenario: Scenario;
  /** closed loop: its connections; open loop: 0 */
  connections: number;
  /** open loop: the req/s offered */
  offered?: number;
}

/** One span of the load: the idle run, one import phase, or the whole import. */
export interface MixedSpan {
  name: string;
  seconds: number;
  /** whether the targets apply to it (the issue's four phases) */
  judged: boolean;
  kinds: MixedFigures[];
}

export interface MixedRun {
  /** the shape of the file imported under the load (absent in runs before it could be other than wide) */
  shape?: ShapeName;
  /** `open`: a fixed rate per kind (the default); `closed`: 32 connections as fast as answered */
  loop?: 'open' | 'closed';
  /** open loop: the closed-loop run idle that measured what the API serves */
  capacity?: MixedSpan;
  /** open loop: each kind's req/s offered, and whether `--mixed-rate` set them (else half the capacity) */
  rates?: { perKind: Record<Scenario, number>; fromFlag: boolean };
  /** before the import */
  idle: MixedSpan;
  /** after the import, once no autovacuum ran (or AUTOVACUUM_WAIT_S passed) */
  idleAfter: MixedSpan;
  /** seconds the idle span after the import waited for autovacuum, and whether it still ran then */
  autovacuumWait: { seconds: number; stillRunning: boolean };
  /** each phase the import was seen in, and each judged phase even if the 100 ms sample never saw it */
  phases: MixedSpan[];
  /** from the end of the import's PUT to `success` */
  whole: MixedSpan;
  importSeconds: number;
  /** the import's phases under the load, and import A's alone in the same run (when it ran) */
  importPhases?: PhaseSpan[];
  alone?: { seconds: number; phases: PhaseSpan[] };
  /** each kind's p99 in a judged phase over its idle p99, at most */
  p99RatioTarget: number;
  /** open loop: the import's seconds under the load over its seconds alone, at most */
  timeRatioTarget?: number;
  /** answers of a kind a phase needs for its p99 to be judged */
  minRequests: number;
  /** the import's load per window, each phase's start in seconds from the end of the upload */
  series?: MixedSeries;
}

export interface MixedSeries {
  windowSeconds: number;
  phases: { phase: string; at: number }[];
  kinds: { scenario: Scenario; windows: SeriesWindow[] }[];
}

interface Ctx {
  baseUrl: string;
  sql: Sql;
  workerPid: number;
}

export interface MixedOptions extends ImportOptions {
  samples: number;
  seconds: number;
  warmupSeconds: number;
  /** the old closed loop through every span */
  closed?: boolean;
  /** req/s in all, split as the capacity run's kinds; absent: CAPACITY_SHARE of each kind's capacity */
  rate?: number;
  /** import A of the same file (its shape's) alone earlier in the run, for the time ratio */
  alone?: { seconds: number; phases: PhaseSpan[] };
}

export async function runMixed(
  ctx: Ctx,
  runId: string,
  file: FileMeta,
  opts: MixedOptions,
  log: (m: string) => void,
): Promise<MixedRun> {
  const loaded = await createBenchAccount(ctx.sql, `${runId} mixed load`);
  const pool = await contactPool(ctx.sql, loaded, 0);
  const target: HttpTarget = {
    name: 'api',
    baseUrl: ctx.baseUrl,
    headers: { authorization: `Bearer ${loaded.key}` },
  };
  const check = (l: Load, tag: string) => checkLoad(ctx.sql, loaded, pool, l, tag);
  for (const s of KINDS) await preflight(target, s, pool, `mixed-${runId}-c`);
  if (opts.warmupSeconds > 0) {
    const warmTimeline = new PhaseTimeline('warmup', performance.now());
    await check(startLoad(target, pool, `mixed-${runId}-w`, opts.warmupSeconds, warmTimeline), `mixed-${runId}-w`);
  }

  let rates: Record<Scenario, number> | undefined;
  const idleSpan = async (name: string) => {
    const how = rates
      ? `open loop, ${KINDS.map((k) => `${k} ${Math.round(rates![k])}`).join(', ')} req/s`
      : '32 connections';
    log(`[mixed] ${name}: GET, POST and PATCH at once, ${how}, ${opts.seconds} s`);
    const tag = `mixed-${runId}-${name.replaceAll(' ', '-')}`;
    const timeline = new PhaseTimeline(name, performance.now());
    const l = startLoad(target, pool, tag, opts.seconds, timeline, { rates });
    timeline.mark('end', await l.ended); // before the checks, which are no part of the load
    await check(l, tag);
    return span(name, timeline.seconds().get(name)!, false, [name], l);
  };
  let capacity: MixedSpan | undefined;
  if (!opts.closed) {
    capacity = await idleSpan('capacity');
    const served = Object.fromEntries(capacity.kinds.map((k) => [k.scenario, k.reqPerSec])) as Record<Scenario, number>;
    rates = opts.rate
      ? splitRate(opts.rate, served)
      : (Object.fromEntries(KINDS.map((k) => [k, Math.max(1, served[k] * CAPACITY_SHARE)])) as Record<
          Scenario,
          number
        >);
  }
  const idle = await idleSpan('idle');

  const shape = shapeOf(file);
  const importer = await createBenchAccount(ctx.sql, `${runId} mixed import`, shape);
  const importName = shape.label('import A');
  try {
    log(`[mixed] ${importName} into another account: the same load from the end of its upload until success`);
    const tag = `mixed-${runId}-import`;
    let timeline: PhaseTimeline | undefined;
    let busy: Load | undefined;
    let origin = 0;
    const onPhase = (phase: string, at: number) => {
      if (!timeline) {
        timeline = new PhaseTimeline(phase, at);
        origin = at;
        // Stopped at success; the duration only bounds a load whose import never ends.
        busy = startLoad(target, pool, tag, opts.timeoutSeconds + 60, timeline, { seriesFrom: at, rates });
      } else timeline.mark(phase, at);
      if (phase === 'success' || phase === 'failed') busy!.stop();
    };
    let run;
    try {
      run = await runImportFlow(ctx, importer, file, `mixed ${importName}`, { ...opts, onPhase });
      // The flow may end on the API's `success` before its 100 ms sample saw it: closes the last phase.
      timeline!.mark('success', performance.now());
    } finally {
      busy?.stop(); // a failed import must not leave the load running
    }
    await check(busy!, tag);
    const autovacuumWait = await autovacuumDone(ctx.sql, AUTOVACUUM_WAIT_S);
    log(
      `[mixed] ${autovacuumWait.stillRunning ? 'autovacuum still running after' : 'autovacuum done after'} ` +
        `${autovacuumWait.seconds.toFixed(0)} s`,
    );
    const written = await pagesWrittenOut(ctx.sql);
    log(`[mixed] the import's pages written out (CHECKPOINT, the kernel's dirty pages) in ${written.toFixed(1)} s`);
    const idleAfter = await idleSpan('idle after');
    await checkImport(ctx, importer, file, run.view, {
      label: `mixed ${importName}`,
      mode: 'added',
      variants: [0],
      samples: opts.samples,
    });
    // Requests sent after `success` was seen are in no span.
    const seconds = timeline!.seconds();
    const seen = [...seconds.keys()];
    const phases = inPhaseOrder([...seen, ...JUDGED_PHASES]).map((p) =>
      span(p, seconds.get(p) ?? 0, JUDGED_PHASES.includes(p), [p], busy!),
    );
    const wholeSeconds = seen.reduce((t, p) => t + seconds.get(p)!, 0);
    // Windows of requests sent after `success` belong to no phase of the import.
    const windowCount = Math.ceil(wholeSeconds / SERIES_SECONDS);
    const series: MixedSeries = {
      windowSeconds: SERIES_SECONDS,
      phases: timeline!.starts(origin),
      kinds: busy!.kinds.map((k) => ({ scenario: k.scenario, windows: k.series!.windows().slice(0, windowCount) })),
    };
    const vsAlone = opts.alone ? ` (${(run.seconds / opts.alone.seconds).toFixed(2)} x alone)` : '';
    log(`[mixed] ${importName} verified: ${run.seconds.toFixed(1)} s under the load${vsAlone}`);
    return {
      shape: shape.name,
      loop: opts.closed ? 'closed' : 'open',
      capacity,
      rates: rates && { perKind: rates, fromFlag: opts.rate !== undefined },
      idle,
      idleAfter,
      autovacuumWait,
      phases,
      whole: span('import', wholeSeconds, false, seen, busy!),
      importSeconds: run.seconds,
      importPhases: run.phases,
      alone: opts.alone,
      p99RatioTarget: P99_RATIO_TARGET,
      timeRatioTarget: opts.closed ? undefined : TIME_RATIO_TARGET,
      minRequests: MIN_REQUESTS,
      series,
    };
  } finally {
    // With the load's account: alone the import's are deleted row by row and vacuumed (25M narrow
    // contacts: 35 s on a slow machine, bench/findings/2026-12-07-mixed-on-narrow-25m.md).
    await dropAccountContacts(ctx.sql, [importer.id, loaded.id]);
  }
}

/**
 * Waits until no autovacuum worker runs (two looks a second apart), at most `maxSeconds`. On a
 * cluster this sees the coordinator's workers only.
 */
async function autovacuumDone(sql: Sql, maxSeconds: number): Promise<{ seconds: number; stillRunning: boolean }> {
  const started = performance.now();
  let quiet = 0;
  for (;;) {
    const [r] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where backend_type = 'autovacuum worker'`;
    quiet = r!.n === 0 ? quiet + 1 : 0;
    const seconds = (performance.now() - started) / 1000;
    if (quiet >= 2) return { seconds, stillRunning: false };
    if (seconds >= maxSeconds) return { seconds, stillRunning: true };
    await Bun.sleep(1000);
  }
}

/** Dirty page cache the idle span after the import waits for (/proc/meminfo `Dirty`), at most DIRTY_WAIT_S. */
const DIRTY_MB = 64;
const DIRTY_WAIT_S = 60;

/**
 * Before the idle span after the import: its pages written out, so that span measures an idle
 * machine. At 3,000 req/s an idle span right after the import had a p99 of 459-586 ms while the
 * kernel wrote its pages, against 4-12 ms before it
 * (bench/findings/2026-12-06-mixed-step-wal-flush-stalls.md). A CHECKPOINT writes PostgreSQL's dirty
 * buffers and syncs its files (without superuser rights on a configured database, skipped); then the
 * kernel's dirty pages (this machine's, where the embedded server writes) until below DIRTY_MB.
 * Returns the seconds it took.
 */
async function pagesWrittenOut(sql: Sql): Promise<number> {
  const started = performance.now();
  await sql.unsafe('checkpoint').catch(() => {});
  const dirtyMb = async () => {
    const m = /^Dirty:\s+(\d+) kB$/m.exec(
      await Bun.file('/proc/meminfo')
        .text()
        .catch(() => ''),
    );
    return m ? Number(m[1]) / 1024 : 0;
  };
  while ((await dirtyMb()) > DIRTY_MB && performance.now() - started < DIRTY_WAIT_S * 1000) await Bun.sleep(250);
  return (performance.now() - started) / 1000;
}

/** Each kind's idle reference: the mean p99 (or p50) of the idle spans before and after the import. */
export function idleReference(m: MixedRun, kind: number, figure: 'p99' | 'p50' = 'p99'): number {
  const [before, after] = [m.idle.kinds[kind]!, m.idleAfter.kinds[kind]!];
  return figure === 'p99' ? bracketP99(before, after) : ((before.p50 ?? NaN) + (after.p50 ?? NaN)) / 2;
}

/** The import under the load as the tables name it: `import A`, `import A (narrow)`. */
export const mixedImportName = (m: Pick<MixedRun, 'shape'>): string => SHAPES[m.shape ?? 'wide'].label('import A');

/** A phase's seconds alone (import A earlier in the run) and under the load, when both are known. */
export function phaseSeconds(m: MixedRun, phase: string): { loaded?: number; alone?: number } {
  const of = (phases: PhaseSpan[] | undefined) => phases?.find((p) => p.phase === phase)?.seconds;
  return { loaded: of(m.importPhases), alone: of(m.alone?.phases) };
}

function span(name: string, seconds: number, judged: boolean, phases: readonly string[], l: Load): MixedSpan {
  return {
    name,
    seconds,
    judged,
    kinds: l.kinds.map((k) => ({
      scenario: k.scenario,
      connections: k.rate === undefined ? CONNECTIONS[k.scenario] : 0,
      ...(k.rate !== undefined && { offered: k.rate }),
      ...k.phases.figures(phases, seconds),
    })),
  };
}

/**
 * Step `mixed`: what an import does to the API of other accounts on the same machine. GET, POST and
 * PATCH load on one account (autocannon, the three at once, 32 connections in all) first with no
 * import running (idle, `--duration` seconds), then from the end of the PUT of import A of file A into
 * another, fresh account until that import is `success`, then idle again once no autovacuum runs.
 * Every answer counts in the import phase that was current when its request was sent
 * (phase-latency.ts), so each phase (read, dedupe, merge, finish) has its own req/s and exact p50/p99
 * per kind, and so has the whole import; the import's load is also cut into 10 s windows by send
 * time (`series`, drawn by bench/report/load-windows.ts). Targets: in each of those phases each
 * kind's p99 at most 2 × its idle p99, no errors, no non-2xx answers; a phase with too few requests
 * of a kind is shown and not judged. Idle is the mean of the two idle spans' p99s (bracketP99): the paced import lasts
 * minutes at 1M rows and hours at 25M, over which this machine's speed drifts, and one idle span
 * before it judged it against whatever moment that span met (at 1M a slow one made every phase
 * look 0.6 × idle). The span after waits for autovacuum to finish with the import's new rows
 * (at most AUTOVACUUM_WAIT_S): that work is the import's, not the machine's idle. Verified after
 * timing: the import's counts and contacts as import A's, and the end state the load's 2xx answers
 * promise (http.ts). The import's contacts are deleted after, so the step needs disk for one more set.
 */
import type { Instance, Result } from 'autocannon';
import type { Sql } from '../../src/db';
import { createBenchAccount, dropAccountContacts, type BenchAccount } from '../lib/account';
import type { FileMeta } from '../lib/generate';
import { load, preflight, verify, type Scenario } from './http';
import type { HttpTarget, PoolContact } from '../lib/types';
import { runImportFlow, type ImportOptions } from '../lib/import-flow';
import { bracketP99, inPhaseOrder, PhaseLoad, PhaseTimeline, type Figures } from '../lib/phase-latency';
import { LatencySeries, type SeriesWindow } from '../lib/latency-series';
import { contactPool } from '../lib/baseline';
import { checkImport } from '../lib/verify';

const KINDS = ['GET', 'POST', 'PATCH'] as const;
/** Connections per kind: 32 in all, as the load. */
const CONNECTIONS: Record<Scenario, number> = { GET: 12, POST: 10, PATCH: 10 };
/** The target: an import leaves the other account's p99 at most this many times its idle p99. */
const P99_RATIO_TARGET = 2;
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
/**
 * The import's load also in windows of this many seconds by send time (latency-series.ts): when in a
 * phase its tail came. A window's histogram holds 80 kB a kind, about 25 MB for an hour's import.
 */
const SERIES_SECONDS = 10;

export interface MixedFigures extends Figures {
  scenario: Scenario;
  connections: number;
}

/** One span of the load: the idle run, one import phase, or the whole import. */
export interface MixedSpan {
  name: string;
  seconds: number;
  /** whether the p99 target applies to it (the four phases) */
  judged: boolean;
  kinds: MixedFigures[];
}

export interface MixedRun {
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
  /** each kind's p99 in a judged phase over its idle p99, at most */
  p99RatioTarget: number;
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

export async function runMixed(
  ctx: Ctx,
  runId: string,
  file: FileMeta,
  opts: ImportOptions & { samples: number; seconds: number; warmupSeconds: number },
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

  const idleSpan = async (name: string) => {
    log(`[mixed] ${name}: GET, POST and PATCH at once, 32 connections, ${opts.seconds} s`);
    const tag = `mixed-${runId}-${name.replaceAll(' ', '-')}`;
    const timeline = new PhaseTimeline(name, performance.now());
    const l = startLoad(target, pool, tag, opts.seconds, timeline);
    timeline.mark('end', await l.ended); // before the checks, which are no part of the load
    await check(l, tag);
    return span(name, timeline.seconds().get(name)!, false, [name], l);
  };
  const idle = await idleSpan('idle');

  const importer = await createBenchAccount(ctx.sql, `${runId} mixed import`);
  try {
    log('[mixed] import A into another account: the same load from the end of its upload until success');
    const tag = `mixed-${runId}-import`;
    let timeline: PhaseTimeline | undefined;
    let busy: Load | undefined;
    let origin = 0;
    const onPhase = (phase: string, at: number) => {
      if (!timeline) {
        timeline = new PhaseTimeline(phase, at);
        origin = at;
        // Stopped at success; the duration only bounds a load whose import never ends.
        busy = startLoad(target, pool, tag, opts.timeoutSeconds + 60, timeline, at);
      } else timeline.mark(phase, at);
      if (phase === 'success' || phase === 'failed') busy!.stop();
    };
    let run;
    try {
      run = await runImportFlow(ctx, importer, file, 'mixed import A', { ...opts, onPhase });
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
    const idleAfter = await idleSpan('idle after');
    await checkImport(ctx, importer, file, run.view, {
      label: 'mixed import A',
      mode: 'added',
      variants: [0],
      samples: opts.samples,
    });
    // Requests sent after `success` was seen (autocannon stops at its next 1 s tick) are in no span.
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
    log(`[mixed] import A verified; the load ran through its ${wholeSeconds.toFixed(1)} s`);
    return {
      idle,
      idleAfter,
      autovacuumWait,
      phases,
      whole: span('import', wholeSeconds, false, seen, busy!),
      importSeconds: run.seconds,
      p99RatioTarget: P99_RATIO_TARGET,
      minRequests: MIN_REQUESTS,
      series,
    };
  } finally {
    await dropAccountContacts(ctx.sql, importer.id);
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

/** Each kind's idle reference: the mean p99 of the idle spans before and after the import. */
export function idleReference(m: MixedRun, kind: number): number {
  return bracketP99(m.idle.kinds[kind]!, m.idleAfter.kinds[kind]!);
}

interface Load {
  kinds: { scenario: Scenario; phases: PhaseLoad; instance: Instance; series?: LatencySeries }[];
  stop(): void;
  /** performance.now() when every kind's load has ended */
  ended: Promise<number>;
}

/**
 * The three kinds at once, each answer put in the timeline's phase of its request's send time and,
 * given `seriesFrom` (ms, performance.now()), in its window of a series starting then.
 */
function startLoad(
  target: HttpTarget,
  pool: readonly PoolContact[],
  tag: string,
  seconds: number,
  timeline: PhaseTimeline,
  seriesFrom?: number,
): Load {
  const kinds = KINDS.map((scenario) => {
    const phases = new PhaseLoad(timeline);
    const series = seriesFrom === undefined ? undefined : new LatencySeries(SERIES_SECONDS);
    series?.begin(seriesFrom!);
    const instance = load(target, scenario, pool, `${tag}-${scenario}`, CONNECTIONS[scenario], seconds);
    instance.on('response', (_client, status, _bytes, ms) => {
      const now = performance.now();
      phases.response(now, ms, status);
      series?.add(now - ms, ms);
    });
    instance.on('reqError', () => phases.error(performance.now()));
    return { scenario, phases, instance, series };
  });
  const ended = Promise.all(kinds.map((k) => k.instance)).then(() => performance.now());
  return { kinds, stop: () => kinds.forEach((k) => k.instance.stop()), ended };
}

/**
 * Waits for the load's end, then the checks of the HTTP step: no error, no non-2xx, and the database
 * holds what the 2xx answers promise (autocannon's own counts: they include what no span shows).
 */
async function checkLoad(sql: Sql, account: BenchAccount, pool: readonly PoolContact[], l: Load, tag: string) {
  const results: Result[] = await Promise.all(l.kinds.map((k) => k.instance));
  for (const [i, { scenario: s, phases }] of l.kinds.entries()) {
    const r = results[i]!;
    if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0)
      throw new Error(
        `mixed ${tag} ${s}: ${r.non2xx} non-2xx answers (${JSON.stringify(r.statusCodeStats)}), ` +
          `${r.errors} errors, ${r.timeouts} timeouts (by phase: ${phases.faults()})`,
      );
    await verify(sql, account.id, s, `${tag}-${s}`, r['2xx'], pool, CONNECTIONS[s]);
  }
}

function span(name: string, seconds: number, judged: boolean, phases: readonly string[], l: Load): MixedSpan {
  return {
    name,
    seconds,
    judged,
    kinds: l.kinds.map((k) => ({
      scenario: k.scenario,
      connections: CONNECTIONS[k.scenario],
      ...k.phases.figures(phases, seconds),
    })),
  };
}

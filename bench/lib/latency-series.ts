/**
 * A long load span cut into windows by the time each request was sent, each window's latencies in a
 * histogram, beside what the machine was doing in that window: where in a span its tail sits. A p99
 * over a 40-minute span says how slow the slowest 1 % were, not when they came; the series says
 * whether they came in a few windows (a checkpoint, an autovacuum, a GC) or all along.
 */
import { readFile } from 'node:fs/promises';
import type { Sql } from '../../src/db';
import { TICKS, type CpuSample } from './cpu';
import { percentile } from './phase-latency';
import { procKb } from './services';

/** Histogram steps: 0.1 ms up to 2 s, then one bucket for anything slower (its exact max is kept). */
const STEP_MS = 0.1;
const BUCKETS = 20_000;

export interface SeriesWindow {
  /** seconds from the span's start to the window's start */
  at: number;
  requests: number;
  /** ms, nearest rank over the histogram (0.1 ms steps, the upper edge of the step) */
  p50?: number;
  p99?: number;
  /** ms, exact */
  max: number;
  /** what the machine did in the window (SystemSampler), absent when it was not sampled */
  system?: SystemWindow;
}

export interface SystemWindow {
  /** buffers written by checkpoints, the background writer and backends (pg_stat_bgwriter deltas) */
  checkpointBuffers: number;
  cleanBuffers: number;
  backendBuffers: number;
  /** checkpoints that ended in the window */
  checkpoints: number;
  /** seconds sampled with an autovacuum worker running, and the tables they were on */
  autovacuumSeconds: number;
  autovacuumTables: string[];
  /** peak resident MB of the API and the worker over the window's samples */
  apiRssMb?: number;
  workerRssMb?: number;
  /**
   * CPU seconds in the window by process tree (cpu.ts's probes, and `bench`: this process, the load
   * generator), and the seconds the host took from this machine's cores (steal, /proc/stat): what
   * a request cost each process, and whether the machine itself slowed.
   */
  cpuSeconds?: CpuSample;
  stealSeconds?: number;
}

export class LatencySeries {
  private readonly histograms: Uint32Array[] = [];
  private readonly maxes: number[] = [];
  private start = Infinity;

  constructor(readonly windowSeconds = 10) {}

  /** The span starts at `at` (ms, performance.now()): answers to requests sent before it are not counted. */
  begin(at: number): void {
    this.start = at;
  }

  /** An answer to a request sent at `sentAt` (ms, performance.now()) that took `ms`. */
  add(sentAt: number, ms: number): void {
    if (sentAt < this.start) return;
    const w = Math.floor((sentAt - this.start) / (this.windowSeconds * 1000));
    while (this.histograms.length <= w) {
      this.histograms.push(new Uint32Array(BUCKETS + 1));
      this.maxes.push(0);
    }
    this.histograms[w]![Math.min(BUCKETS, Math.floor(ms / STEP_MS))]!++;
    if (ms > this.maxes[w]!) this.maxes[w] = ms;
  }

  windows(system?: readonly (SystemWindow | undefined)[]): SeriesWindow[] {
    return this.histograms.map((h, w) => {
      const requests = h.reduce((n, c) => n + c, 0);
      const at = (p: number) => histogramPercentile(h, requests, p, this.maxes[w]!);
      const s = system?.[w];
      return {
        at: w * this.windowSeconds,
        requests,
        p50: at(50),
        p99: at(99),
        max: this.maxes[w]!,
        ...(s && { system: s }),
      };
    });
  }
}

/** Nearest rank as phase-latency.ts's percentile, read off the histogram; the overflow bucket is the max. */
function histogramPercentile(h: Uint32Array, n: number, p: number, max: number): number | undefined {
  if (n === 0) return undefined;
  const rank = Math.max(1, Math.ceil((p * n) / 100));
  let seen = 0;
  for (let b = 0; b < h.length; b++) {
    seen += h[b]!;
    if (seen >= rank) return b === BUCKETS ? max : Math.min(max, (b + 1) * STEP_MS);
  }
  return max;
}

interface BgWriter {
  checkpoints: number;
  checkpointBuffers: number;
  cleanBuffers: number;
  backendBuffers: number;
}

/** A window in which the machine did nothing the sampler counts: where each window's sums start. */
export function quietWindow(): SystemWindow {
  return {
    checkpointBuffers: 0,
    cleanBuffers: 0,
    backendBuffers: 0,
    checkpoints: 0,
    autovacuumSeconds: 0,
    autovacuumTables: [],
  };
}

/** Seconds of steal over every core since boot (the 8th value of /proc/stat's `cpu` line); 0 off Linux. */
async function stealSeconds(): Promise<number> {
  const text = await readFile('/proc/stat', 'utf8').catch(() => '');
  const cpu = text.split('\n', 1)[0]!.trim().split(/\s+/);
  return cpu[0] === 'cpu' ? Number(cpu[8] ?? 0) / TICKS : 0;
}

/** This process's CPU seconds: the bench, which also generates the load. */
function benchSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/**
 * Once a second: PostgreSQL's buffer writes and checkpoints (pg_stat_bgwriter), its autovacuum
 * workers and their tables (pg_stat_progress_vacuum), the API's and worker's resident size, and,
 * given a CPU sampler, each process's CPU seconds and the host's steal, each folded into the window
 * of the LatencySeries it runs beside. One small query and one read of /proc a second: nothing the
 * load would notice.
 */
export class SystemSampler {
  private readonly out: SystemWindow[] = [];
  private running = true;
  private readonly loop: Promise<void>;

  constructor(
    private readonly sql: Sql,
    private readonly start: number,
    private readonly windowSeconds: number,
    private readonly pids: { api?: number; worker?: number },
    private readonly sampleCpu?: () => Promise<CpuSample>,
  ) {
    this.loop = this.run();
  }

  private async bgwriter(): Promise<BgWriter> {
    const [r] = await this.sql<BgWriter[]>`
      select (checkpoints_timed + checkpoints_req)::float8 as checkpoints,
        buffers_checkpoint::float8 as "checkpointBuffers", buffers_clean::float8 as "cleanBuffers",
        buffers_backend::float8 as "backendBuffers"
      from pg_stat_bgwriter`;
    return r!;
  }

  private async cpu(): Promise<{ cpu: CpuSample; steal: number } | undefined> {
    if (!this.sampleCpu) return undefined;
    return { cpu: { ...(await this.sampleCpu()), bench: benchSeconds() }, steal: await stealSeconds() };
  }

  private async run(): Promise<void> {
    let last = await this.bgwriter();
    let lastCpu = await this.cpu();
    while (this.running) {
      await Bun.sleep(1000);
      const now = await this.bgwriter();
      const nowCpu = await this.cpu();
      const vacuums = await this.sql<{ name: string }[]>`
        select coalesce(c.relname, p.relid::text) as name
        from pg_stat_progress_vacuum p left join pg_class c on c.oid = p.relid`;
      const api = this.pids.api ? await procKb(this.pids.api, 'VmRSS') : undefined;
      const worker = this.pids.worker ? await procKb(this.pids.worker, 'VmRSS') : undefined;
      const w = Math.max(0, Math.floor((performance.now() - this.start) / (this.windowSeconds * 1000)));
      while (this.out.length <= w) this.out.push(quietWindow());
      const s = this.out[w]!;
      s.checkpoints += now.checkpoints - last.checkpoints;
      s.checkpointBuffers += now.checkpointBuffers - last.checkpointBuffers;
      s.cleanBuffers += now.cleanBuffers - last.cleanBuffers;
      s.backendBuffers += now.backendBuffers - last.backendBuffers;
      if (vacuums.length > 0) s.autovacuumSeconds++;
      for (const v of vacuums) if (!s.autovacuumTables.includes(v.name)) s.autovacuumTables.push(v.name);
      if (api !== undefined) s.apiRssMb = Math.max(s.apiRssMb ?? 0, Math.round(api / 1024));
      if (worker !== undefined) s.workerRssMb = Math.max(s.workerRssMb ?? 0, Math.round(worker / 1024));
      if (nowCpu && lastCpu) {
        const spent = (s.cpuSeconds ??= {});
        for (const [k, v] of Object.entries(nowCpu.cpu)) spent[k] = (spent[k] ?? 0) + v - (lastCpu.cpu[k] ?? v);
        s.stealSeconds = (s.stealSeconds ?? 0) + nowCpu.steal - lastCpu.steal;
      }
      last = now;
      lastCpu = nowCpu;
    }
  }

  async stop(): Promise<SystemWindow[]> {
    this.running = false;
    await this.loop;
    return this.out;
  }
}

/** The `count` windows with the highest p99, slowest first: where a span's tail came from. */
export function worstWindows(windows: readonly SeriesWindow[], count: number): SeriesWindow[] {
  return [...windows]
    .filter((w) => w.p99 !== undefined)
    .sort((a, b) => b.p99! - a.p99!)
    .slice(0, count);
}

/** One line on how a span's window p99s spread, beside the span's own p99. */
export function seriesSummary(windows: readonly SeriesWindow[], spanP99: number): string {
  const n = windows.reduce((s, w) => s + w.requests, 0);
  const sorted = windows.map((w) => w.p99 ?? 0).sort((a, b) => a - b);
  const at = (p: number) => percentile(sorted, p)?.toFixed(1);
  return (
    `${windows.length} windows of ${n} answers; window p99s: median ${at(50)} ms, 90th ${at(90)} ms, ` +
    `max ${sorted.at(-1)?.toFixed(1)} ms (span p99 ${spanP99.toFixed(1)} ms)`
  );
}

/**
 * The span's first and last quarter side by side: answers a second, the median window p99, each
 * process's CPU µs per answer and the host's steal a second. A p99 that climbs while the API's CPU per
 * answer climbs is the API; while steal or the load generator's CPU climbs, it is the machine or the bench.
 */
export function driftSummary(windows: readonly SeriesWindow[], windowSeconds: number): string | undefined {
  const full = windows.filter((w) => w.requests > 0);
  const q = Math.floor(full.length / 4);
  if (q === 0) return undefined;
  const part = (ws: readonly SeriesWindow[]) => {
    const answers = ws.reduce((n, w) => n + w.requests, 0);
    const p99s = ws.map((w) => w.p99 ?? 0).sort((a, b) => a - b);
    const cpu: Record<string, number> = {};
    let steal = 0;
    for (const w of ws) {
      for (const [k, v] of Object.entries(w.system?.cpuSeconds ?? {})) cpu[k] = (cpu[k] ?? 0) + v;
      steal += w.system?.stealSeconds ?? 0;
    }
    const perAnswer = Object.entries(cpu)
      .map(([k, v]) => `${k} ${((v * 1e6) / answers).toFixed(0)}`)
      .join(', ');
    return (
      `${(answers / (ws.length * windowSeconds)).toFixed(0)} answers/s, median window p99 ` +
      `${percentile(p99s, 50)?.toFixed(1)} ms` +
      (perAnswer
        ? `, CPU µs per answer ${perAnswer}, steal ${(steal / (ws.length * windowSeconds)).toFixed(2)} s/s`
        : '')
    );
  };
  return `first ${q} windows: ${part(full.slice(0, q))}; last ${q}: ${part(full.slice(-q))}`;
}

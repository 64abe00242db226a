/** Glue for index.ts: the target checks and the phase breakdown of an import. */
import { GET_P99_MS } from '../steps/http';
import type { ImportRun } from './import-flow';
import type { HttpRow, LoadRow, Target } from './types';
import { idleReference, mixedImportName, type MixedRun } from '../steps/mixed';
import type { ReportCostFile } from '../steps/report-cost';
import { SHAPES } from './shapes';
import type { ShapeRun } from '../steps/shape-steps';

export function evaluateTargets(load: LoadRow[], http: HttpRow[]): Target[] {
  const out: Target[] = [];
  for (const r of load) {
    if (r.ratioToL1 !== undefined && r.target !== undefined) {
      out.push({
        name: `${r.step} time vs L1`,
        value: `${r.ratioToL1.toFixed(2)} x`,
        target: `<= ${r.target} x`,
        pass: r.ratioToL1 <= r.target,
      });
    }
    if (r.ratioToDba !== undefined && r.dbaTarget !== undefined) {
      out.push({
        name: `${r.step} time vs the dba step`,
        value: `${r.ratioToDba.toFixed(2)} x`,
        target: `<= ${r.dbaTarget} x`,
        pass: r.ratioToDba <= r.dbaTarget,
      });
    }
    if (r.workerPeakRssMb !== undefined) {
      out.push({
        name: `${r.step} worker peak RSS`,
        value: `${r.workerPeakRssMb.toFixed(0)} MB`,
        target: '<= 256 MB',
        pass: r.workerPeakRssMb <= 256,
      });
    }
  }
  for (const r of http) {
    if (r.target !== 'api') continue;
    if (r.ratio !== undefined && r.minRatio !== undefined) {
      out.push({
        name: `${r.scenario} req/s vs baseline`,
        value: `${r.ratio.toFixed(2)} x`,
        target: `>= ${r.minRatio} x`,
        pass: r.ratio >= r.minRatio,
      });
    }
    if (r.scenario === 'GET')
      out.push({
        name: 'GET p99 at the tested connections',
        value: `${r.p99} ms`,
        target: `< ${GET_P99_MS} ms`,
        pass: r.p99 < GET_P99_MS,
      });
  }
  return out;
}

/**
 * CPU per 1M rows of every process (PostgreSQL, API, importer), all of an import's phases, against
 * the dba step's COPY + upsert of the same file (PostgreSQL alone: the bench stands for psql):
 * import A at most 0.9 ×, import B at most 1 ×, for every shape.
 */
export const TARGET_CPU_X_DBA = { a: 0.9, b: 1 } as const;

export function cpuTargets(runs: ShapeRun[]): Target[] {
  const sum = (cpu: Record<string, number>) => Object.values(cpu).reduce((a, b) => a + b, 0);
  const out: Target[] = [];
  for (const run of runs) {
    for (const key of ['a', 'b'] as const) {
      const imported = key === 'a' ? run.importA : run.importB;
      const d = run.dba?.[key];
      const file = run.files[key];
      if (!imported?.cpu || !d?.cpu || !file) continue;
      const perM = (seconds: number) => (seconds * 1e6) / file.rows;
      const mine = perM(imported.cpu.reduce((s, p) => s + sum(p.cpu), 0));
      const peer = perM(sum(d.cpu.copy) + sum(d.cpu.upsert));
      const ratio = mine / peer;
      const step = SHAPES[run.shape].label(`import ${key.toUpperCase()}`);
      out.push({
        name: `${step} CPU per 1M rows vs the dba step's (${mine.toFixed(1)} / ${peer.toFixed(1)} s)`,
        value: `${ratio.toFixed(2)} x`,
        target: `<= ${TARGET_CPU_X_DBA[key]} x`,
        pass: ratio <= TARGET_CPU_X_DBA[key],
      });
    }
  }
  return out;
}

/** The report step: its cost per file (the issue's <= 3%) and the worker's peak with the report on. */
export function reportCostTargets(files: ReportCostFile[]): Target[] {
  return files.flatMap((f) => [
    {
      name: `rejected-rows report cost, ${f.file === 'A' ? 'file A' : 'clean file'}`,
      value: `${f.costPercent.toFixed(1)} %`,
      target: `<= ${f.targetPercent} %`,
      pass: f.met,
    },
    ...(f.on.workerPeakRssMb === undefined
      ? []
      : [
          {
            name: `rejected-rows report on, ${f.file === 'A' ? 'file A' : 'clean file'}, worker peak RSS`,
            value: `${f.on.workerPeakRssMb.toFixed(0)} MB`,
            target: '<= 256 MB',
            pass: f.on.workerPeakRssMb <= 256,
          },
        ]),
  ]);
}

/**
 * The mixed step: in each judged phase of its import A, each kind's p99 (and with the open loop its p50)
 * against its idle reference (the mean of the idle spans before and after the import:
 * idleReference). A phase with fewer answers of a kind than the run's minimum (or one the 100 ms
 * sample never saw) is listed as not judged, so its absence is seen; its errors and non-2xx answers
 * still count. With the open loop, the import's time under the load against its shape's import A
 * alone in the same run (not judged when the run had none).
 */
export function mixedTargets(m: MixedRun): Target[] {
  const n = (x: number) => x.toLocaleString('en-US');
  const imported = mixedImportName(m);
  const figures = m.loop === 'open' ? (['p50', 'p99'] as const) : (['p99'] as const);
  const latency = m.phases
    .filter((p) => p.judged)
    .flatMap((p) =>
      p.kinds.flatMap((k, i) =>
        figures.map((figure) => {
          const idle = idleReference(m, i, figure);
          const clean = k.errors === 0 && k.non2xx === 0;
          const about = `mixed ${k.scenario} ${figure} in ${imported}'s ${p.name} vs idle`;
          const target = `<= ${m.p99RatioTarget} x, 0 errors, 0 non-2xx`;
          const value = k[figure];
          if (k.requests < m.minRequests || value === undefined || !Number.isFinite(idle))
            return {
              name: about,
              value: `${n(k.requests)} answers, too few to judge (< ${n(m.minRequests)})`,
              target,
              pass: clean,
              judged: false,
            };
          const ratio = value / idle;
          return {
            name: `${about} (${value.toFixed(1)} / ${idle.toFixed(1)} ms, ${n(k.requests)} answers)`,
            value: `${ratio.toFixed(2)} x`,
            target,
            pass: ratio <= m.p99RatioTarget && clean,
          };
        }),
      ),
    );
  if (m.timeRatioTarget === undefined) return latency;
  const name = `mixed ${imported}'s time under the load vs alone`;
  const target = `<= ${m.timeRatioTarget} x`;
  const time: Target = m.alone
    ? {
        name: `${name} (${m.importSeconds.toFixed(1)} / ${m.alone.seconds.toFixed(1)} s)`,
        value: `${(m.importSeconds / m.alone.seconds).toFixed(2)} x`,
        target,
        pass: m.importSeconds / m.alone.seconds <= m.timeRatioTarget,
      }
    : {
        name,
        value: `${m.importSeconds.toFixed(1)} s (no ${imported} alone in this run)`,
        target,
        pass: true,
        judged: false,
      };
  return [...latency, time];
}

/** `uploaded 0.4s | read 12.1s (55%) | dedupe 2.0s (9%) | …` */
export function phaseTable(run: ImportRun): string {
  const total = run.phases.reduce((s, p) => s + p.seconds, 0) || 1;
  const phases = run.phases
    .map((p) => `${p.phase} ${p.seconds.toFixed(1)}s (${Math.round((p.seconds / total) * 100)}%)`)
    .join(' | ');
  const b = run.mergeBatches;
  const f = (x: number) => x.toFixed(2);
  const w = run.pageWrites;
  const mb = (pages: number) => `${Math.round((pages * 8192) / 1e6)} MB`;
  return [
    phases,
    b &&
      `  merge seconds per 100k rows (${b.count} samples): first ${f(b.first)} / last ${f(b.last)} / ` +
        `min ${f(b.min)} / median ${f(b.median)} / max ${f(b.max)}`,
    w &&
      `  pages written: ${w.checkpoints} checkpoint(s); by the checkpointer ${mb(w.checkpointer)}, ` +
        `the background writer ${mb(w.bgwriter)}, backends ${mb(w.backends)}`,
  ]
    .filter(Boolean)
    .join('\n');
}

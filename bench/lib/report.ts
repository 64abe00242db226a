/**
 * Presentation: progress lines during long steps, the final table on stdout, and the JSON result
 * file with a description of the machine.
 */
import { cpus, totalmem } from 'node:os';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { FileMeta } from './generate';
import type { GzipRun } from '../steps/gzip-import';
import type { ImportRun } from './import-flow';
import { fix, fmtInt, table } from './format';
import type { HttpRow, LoadRow, Target } from './types';
import type { ReportCostFile } from '../steps/report-cost';
import { idleReference, mixedImportName, phaseSeconds, type MixedRun } from '../steps/mixed';
import type { DatabaseRun } from '../steps/citus';
import type { ShapeRun } from '../steps/shape-steps';
import { SMALL_ROWS } from '../steps/small-import';
import { SHAPES } from './shapes';
import { writeHtmlBeside } from '../report/command';

export function loadTable(rows: LoadRow[]): string {
  return table(
    [
      'step',
      'rows',
      'seconds',
      'rows/s',
      'MB/s',
      'x L1',
      'target',
      'x dba',
      'target',
      'x pgloader',
      'worker peak RSS MB',
    ],
    rows.map((r) => [
      r.step,
      fmtInt(r.rows),
      fix(r.seconds, 2),
      fmtInt(r.rows / r.seconds),
      fix(r.bytes / 1e6 / r.seconds, 1),
      fix(r.ratioToL1, 2),
      r.target === undefined ? '-' : `<= ${r.target}`,
      fix(r.ratioToDba, 2),
      r.dbaTarget === undefined ? '-' : `<= ${r.dbaTarget}`,
      fix(r.ratioToPgloader, 2),
      fix(r.workerPeakRssMb, 0),
    ]),
  );
}

export function httpTable(rows: HttpRow[]): string {
  return table(
    ['request', 'server', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', 'x baseline', 'target'],
    rows.map((r) => [
      r.scenario,
      r.target,
      fmtInt(r.reqPerSec),
      fix(r.p50, 1),
      fix(r.p99, 1),
      String(r.non2xx),
      String(r.errors),
      fix(r.ratio, 2),
      r.minRatio === undefined ? '-' : `>= ${r.minRatio}`,
    ]),
  );
}

/**
 * The mixed step: a block per span (the capacity run, idle before, each import phase, the whole
 * import, idle after), a row per kind, each loaded span's p50 and p99 against the kind's idle
 * reference (idleReference), and with the open loop each phase's seconds against import A's alone.
 * A judged phase with fewer answers of a kind than the run's minimum shows its ratio, marked `too few`.
 */
export function mixedTable(m: MixedRun): string {
  const open = m.loop === 'open';
  const idles = [m.idle, m.idleAfter];
  const spans = [...(m.capacity ? [m.capacity] : []), m.idle, ...m.phases, m.whole, m.idleAfter];
  const rows = spans.flatMap((span) =>
    span.kinds.map((k, i) => {
      const loaded = !idles.includes(span) && span !== m.capacity;
      const ratio = (figure: 'p50' | 'p99') =>
        !loaded || k[figure] === undefined ? undefined : k[figure]! / idleReference(m, i, figure);
      const verdict = !span.judged ? '-' : k.requests < m.minRequests ? 'too few' : `<= ${m.p99RatioTarget}`;
      const time =
        span === m.whole
          ? { loaded: m.importSeconds, alone: m.alone?.seconds }
          : loaded
            ? phaseSeconds(m, span.name)
            : {};
      const timeRatio = time.loaded !== undefined && time.alone ? time.loaded / time.alone : undefined;
      return [
        i === 0 ? span.name : '',
        i === 0 ? fix(span.seconds, 1) : '',
        ...(open ? [i === 0 ? fix(time.alone, 1) : '', i === 0 ? fix(timeRatio, 2) : ''] : []),
        k.scenario,
        open ? (k.offered === undefined ? '-' : fmtInt(k.offered)) : String(k.connections),
        fmtInt(k.requests),
        fmtInt(k.reqPerSec),
        fix(k.p50, 1),
        fix(k.p99, 1),
        span === m.idle ? fix(idleReference(m, i, 'p50'), 1) : '',
        span === m.idle ? fix(idleReference(m, i), 1) : '',
        fix(ratio('p50'), 2),
        fix(ratio('p99'), 2),
        verdict,
        String(k.non2xx),
        String(k.errors),
      ];
    }),
  );
  const head = [
    'phase',
    'seconds',
    ...(open ? ['alone s', 'x alone'] : []),
    'request',
    open ? 'offered/s' : 'conns',
    'answers',
    'req/s',
    'p50 ms',
    'p99 ms',
    'idle p50',
    'idle p99',
    'x idle p50',
    'x idle p99',
  ];
  const wait = m.autovacuumWait;
  const after = wait.stillRunning ? 'with autovacuum still running' : 'once autovacuum was done';
  const load = !open
    ? 'closed loop, 32 connections'
    : `open loop at ${m.rates?.fromFlag ? '--mixed-rate' : 'half the capacity run'}'s rate ` +
      `(${fmtInt(Object.values<number>(m.rates?.perKind ?? {}).reduce((a, b) => a + b, 0))} req/s in all)`;
  const alone = !open
    ? ''
    : m.alone
      ? `; each phase's seconds against ${mixedImportName(m)}'s alone earlier in the run ` +
        `(target <= ${m.timeRatioTarget} x the whole import)`
      : `; no ${mixedImportName(m)} alone in this run to set its time against`;
  return (
    `mixed: another account's load, ${load}, idle for ${fix(m.idle.seconds, 1)} s, ` +
    `then from the end of ${mixedImportName(m)}'s upload ` +
    `to its success (${fix(m.whole.seconds, 1)} s; the import took ${fix(m.importSeconds, 1)} s), then idle again ` +
    `after ${fix(wait.seconds, 0)} s ${after}; ` +
    `each answer in the phase its request was sent in; p50/p99 exact, latency from each request's due time; ` +
    'the idle reference is the mean of the two idle spans; ' +
    `a phase judged from ${fmtInt(m.minRequests)} answers of a kind` +
    `${alone}\n` +
    table([...head, 'target', 'non-2xx', 'errors'], rows)
  );
}

export async function describeMachine(pgVersion: string) {
  const cpu = cpus();
  return {
    cpuModel: cpu[0]?.model ?? 'unknown',
    cores: cpu.length,
    memoryGb: Number((totalmem() / 1024 ** 3).toFixed(1)),
    postgres: pgVersion,
    bun: Bun.version,
    platform: `${process.platform} ${process.arch}`,
  };
}

export async function writeResults(dir: string, result: object): Promise<string> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  await Bun.write(path, `${JSON.stringify(result, null, 2)}\n`);
  // The HTML report beside it (bench/report). A chart that cannot be drawn must not fail a run whose
  // JSON is written: `bun run bench report <file>` draws it again once the chart is fixed.
  await writeHtmlBeside(path, result).catch((e) => console.error(`[bench] no HTML report for ${path}: ${e}`));
  return path;
}

/**
 * `import A gzip: 187.0 MB -> 52.3 MB gzip (3.58:1, level 6, compressed once in 4.1 s); upload 0.3 s
 * (import A 1.1 s); import 12.9 s = 1.02 x import A, 6.83 x L1`
 */
export function gzipLine(plain: FileMeta, run: GzipRun, a: ImportRun | undefined, l1: { seconds: number } | undefined) {
  const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;
  const f = run.file;
  return (
    `import A gzip: ${mb(plain.bytes)} -> ${mb(f.bytes)} gzip (${fix(plain.bytes / f.bytes, 2)}:1, level ${f.level}, ` +
    `compressed once in ${fix(f.compressSeconds, 1)} s); upload ${fix(run.uploadSeconds, 2)} s` +
    `${a ? ` (import A ${fix(a.uploadSeconds, 2)} s)` : ''}; import ${fix(run.seconds, 2)} s` +
    `${a ? ` = ${fix(run.seconds / a.seconds, 2)} x import A` : ''}` +
    `${l1 ? `, ${fix(run.seconds / l1.seconds, 2)} x L1` : ''}`
  );
}

/**
 * The report step's table: per file, the median seconds with the report off and on, the cost, the same
 * by the worker's clock (off / on, cost), the finish phase (where the report is written) and the
 * worker's peak RSS; then each run in order.
 */
export function reportCostTable(files: ReportCostFile[]): string {
  const pct = (n: number) => `${n >= 0 ? '+' : ''}${fix(n, 1)}%`;
  const t = table(
    [
      'file',
      'rows',
      'rejected',
      'off s (median)',
      'on s',
      'cost (paired)',
      'by worker clock',
      'finish off s',
      'finish on s',
      'worker peak RSS MB off',
      'on',
      'target',
    ],
    files.map((f) => [
      f.file === 'A' ? 'file A' : 'clean (A without rejected)',
      fmtInt(f.rows),
      fmtInt(f.rejected),
      fix(f.off.seconds, 2),
      fix(f.on.seconds, 2),
      pct(f.costPercent),
      `${fix(f.off.workerSeconds, 2)} / ${fix(f.on.workerSeconds, 2)} s ${pct(f.workerCostPercent)}`,
      fix(f.off.finishSeconds, 2),
      fix(f.on.finishSeconds, 2),
      fix(f.off.workerPeakRssMb, 0),
      fix(f.on.workerPeakRssMb, 0),
      `<= ${f.targetPercent}%: ${f.met ? 'met' : 'missed'}`,
    ]),
  );
  const run = (r: ReportCostFile['runs'][number]) =>
    `${r.report ? 'on' : 'off'} ${fix(r.seconds, 2)} (${fix(r.workerSeconds, 2)})`;
  const order = files.map(
    (f) =>
      `  ${f.file}: ${f.runs.map(run).join(', ')} s; runs of one setting ${fix(f.spreadPercent, 1)}% apart; ` +
      `report lines ${f.runs.find((r) => r.report)?.reportLines ?? 0}`,
  );
  const head =
    'rejected-rows report, runs off, on, on, off, on, off, off, on, three times, each into a fresh account ' +
    '(seconds, by worker clock):';
  return `${head}\n${t}\n${order.join('\n')}`;
}

/**
 * `--citus`: import A and the HTTP step on the single node beside the cluster, then what each process's
 * CPU did per million imported rows (each import phase) and per answered request.
 */
export function sideBySide(single: DatabaseRun, cluster: DatabaseRun, fileA: FileMeta): string {
  const rows: string[][] = [];
  const pair = (name: string, a: number | undefined, b: number | undefined, digits: number, int = false) => {
    const f = (n: number | undefined) => (n === undefined ? '-' : int ? fmtInt(n) : fix(n, digits));
    rows.push([name, f(a), f(b), a && b !== undefined ? fix(b / a, 2) : '-']);
  };
  const phase = (r: DatabaseRun, p: string) => r.importA?.phases.find((s) => s.phase === p)?.seconds;
  if (single.importA || cluster.importA) {
    pair('import A seconds', single.importA?.seconds, cluster.importA?.seconds, 2);
    pair('import A rows/s', rowsPerSecond(single, fileA), rowsPerSecond(cluster, fileA), 0, true);
    const phases = [...new Set([single, cluster].flatMap((r) => r.importA?.phases.map((p) => p.phase) ?? []))];
    for (const p of phases) pair(`  ${p} seconds`, phase(single, p), phase(cluster, p), 2);
    pair('contacts bytes on disk / contact', bytesPer(single), bytesPer(cluster), 0, true);
  }
  if (single.small || cluster.small)
    pair('small import seconds (median of 5)', single.small?.median, cluster.small?.median, 2);
  const clusterOnly = cluster.http.filter((c) => !single.http.some((r) => r.target === c.target));
  for (const h of [...(single.http.length ? single.http : cluster.http), ...clusterOnly]) {
    const other = cluster.http.find((r) => r.scenario === h.scenario && r.target === h.target);
    const mine = single.http.find((r) => r.scenario === h.scenario && r.target === h.target);
    pair(`${h.scenario} ${h.target} req/s`, mine?.reqPerSec, other?.reqPerSec, 0, true);
    pair(`${h.scenario} ${h.target} p99 ms`, mine?.p99, other?.p99, 1);
  }
  // Issue 40's figure: the database's CPU per request, summed over every node, against one
  // PostgreSQL's through the API on it; on the cluster for each API (on the coordinator, on each worker).
  for (const h of cluster.http.filter(isApi)) {
    const mine = single.http.find((r) => r.scenario === h.scenario && r.target === 'api');
    const where = h.target === 'api' ? 'api (coordinator)' : h.target;
    pair(`${h.scenario} ${where} database CPU ms/request`, mine && databaseMs(mine), databaseMs(h), 3);
  }
  const accountOn = cluster.accountNode ? ` (the account's shards on ${cluster.accountNode})` : '';
  const head = ['', single.label, `${cluster.label}${accountOn}`, `x ${single.label}`];
  const storage = cluster.storage?.nodes.length
    ? `\n${cluster.label} contacts per node: ${cluster.storage.nodes
        .map((n) => `${n.node} ${fmtInt(n.contacts)} in ${n.shards} shards, ${fix(n.bytes / 1e6, 0)} MB`)
        .join('; ')}`
    : '';
  const measured = [single, cluster].some((r) => r.importA?.cpu || r.http.some((h) => h.cpuMsPerRequest));
  const cpu = measured ? `\n\n${cpuTable([single, cluster], fileA)}` : '';
  return `${table(head, rows)}${storage}${cpu}`;
}

/** The service's APIs among the HTTP step's targets: on the single node `api`; on a cluster also `api-on-worker-k`. */
const isApi = (h: HttpRow) => h.target === 'api' || h.target.startsWith('api-on-');

/** The database's CPU per answered request: PostgreSQL's, or every node's of a cluster summed. */
const databaseMs = (h: HttpRow) =>
  h.cpuMsPerRequest &&
  Object.entries(h.cpuMsPerRequest)
    .filter(([p]) => p === 'postgres' || p === 'coordinator' || p.startsWith('worker-'))
    .reduce((a, [, v]) => a + v, 0);

/** Issue 40's target: per request kind, the cluster's database CPU through its cheapest API ≤ 2 × the single node's. */
export const CLUSTER_CPU_RATIO = 2;

export function clusterCpuTargets(single: DatabaseRun, cluster: DatabaseRun | undefined): Target[] {
  if (!cluster) return [];
  const targets: Target[] = [];
  for (const scenario of ['GET', 'POST', 'PATCH']) {
    const one = single.http.find((r) => r.scenario === scenario && r.target === 'api');
    const oneMs = one && databaseMs(one);
    const best = cluster.http
      .filter((r) => r.scenario === scenario && isApi(r) && databaseMs(r) !== undefined)
      .sort((a, b) => databaseMs(a)! - databaseMs(b)!)[0];
    if (!oneMs || !best) continue;
    const ratio = databaseMs(best)! / oneMs;
    targets.push({
      name: `${scenario} database CPU per request, the cluster (all nodes, via ${best.target}) vs one PostgreSQL`,
      value: `${ratio.toFixed(2)} x`,
      target: `<= ${CLUSTER_CPU_RATIO} x`,
      pass: ratio <= CLUSTER_CPU_RATIO,
    });
  }
  return targets;
}

const rowsPerSecond = (r: DatabaseRun, fileA: FileMeta) => (r.importA ? fileA.rows / r.importA.seconds : undefined);
const bytesPer = (r: DatabaseRun) => (r.storage?.contacts ? r.storage.bytes / r.storage.contacts : undefined);

/**
 * What each process tree's CPU did per 1M rows of the file (the dba step's COPY and upsert, the
 * pgloader step's load and upsert together, each import phase) and per answered request, by file
 * shape (`import A (narrow) read`). A run without `shapes` (the cluster's) has the wide file A's
 * import A alone.
 */
export function cpuTable(runs: DatabaseRun[], fileA: FileMeta | undefined): string {
  const lines: { name: string; cpu: Record<string, number> }[] = [];
  const perM = (cpu: Record<string, number>, rows: number) =>
    Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, (v * 1e6) / rows]));
  for (const r of runs) {
    const shapes: ShapeRun[] =
      r.shapes ?? (r.importA && fileA ? [{ shape: 'wide', files: { a: fileA }, importA: r.importA }] : []);
    for (const s of shapes) {
      const shape = SHAPES[s.shape];
      for (const key of ['a', 'b'] as const) {
        const d = s.dba?.[key];
        const file = s.files[key];
        const name = shape.label(`dba ${key.toUpperCase()}`);
        if (!d?.cpu || !file) continue;
        lines.push({ name: `${r.label}: ${name} COPY, s per 1M rows`, cpu: perM(d.cpu.copy, file.rows) });
        lines.push({ name: `${r.label}: ${name} upsert, s per 1M rows`, cpu: perM(d.cpu.upsert, file.rows) });
      }
      for (const key of ['a', 'b'] as const) {
        const p = s.pgloader?.[key];
        const file = s.files[key];
        if (p?.cpu && file)
          lines.push({
            name: `${r.label}: ${shape.label(`pgloader ${key.toUpperCase()}`)} load + upsert, s per 1M rows`,
            cpu: perM(p.cpu, file.rows),
          });
      }
      for (const key of ['a', 'b'] as const) {
        const run = key === 'a' ? s.importA : s.importB;
        const file = s.files[key];
        const name = shape.label(`import ${key.toUpperCase()}`);
        if (!file) continue;
        for (const p of run?.cpu ?? [])
          lines.push({ name: `${r.label}: ${name} ${p.phase}, s per 1M rows`, cpu: perM(p.cpu, file.rows) });
      }
    }
    for (const h of r.http)
      if (h.cpuMsPerRequest)
        lines.push({ name: `${r.label}: ${h.scenario} ${h.target}, ms per request`, cpu: h.cpuMsPerRequest });
  }
  const procs = [...new Set(lines.flatMap((l) => Object.keys(l.cpu)))];
  const sum = (c: Record<string, number>) => Object.values(c).reduce((a, b) => a + b, 0);
  const title = "CPU per unit of work (each process tree's user + system time)";
  return `${title}\n${table(
    ['', ...procs, 'total'],
    lines.map((l) => [l.name, ...procs.map((p) => fix(l.cpu[p], 3)), fix(sum(l.cpu), 3)]),
  )}`;
}

/** Step `small` on the single node alone (with --citus, sideBySide shows it). */
export function smallLine(run: DatabaseRun): string {
  const s = run.small!;
  return (
    `small: ${s.seconds.length} imports of ${SMALL_ROWS} rows, each into a new account, end of upload to success: ` +
    `median ${fix(s.median, 2)} s (${s.seconds.map((x) => fix(x, 2)).join(', ')})`
  );
}

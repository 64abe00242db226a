/**
 * Each import on a time axis from the end of its upload to success: its phases as a band, rows a
 * second, and each process's CPU (cores busy: CPU seconds per second) stacked. From the import's
 * once-a-second samples (bench/lib/import-flow.ts `series`) when the run recorded them; an older
 * run recorded phase totals only, drawn as each phase's average and said so.
 */
import { colour, el, esc, figure, frame, legend, short, svg, type Chart } from './svg';
import { shapesOf, type CpuSample, type FileInfo, type ImportData, type ImportSample, type ResultData } from './model';

/** More intervals than this and neighbouring samples are merged: a pixel or two each at 860 px. */
const MAX_INTERVALS = 300;

const PHASE_COLOURS: Record<string, string> = {
  uploaded: '#d4d4d4',
  starting: '#bdbdbd',
  read: '#a0cbe8',
  dedupe: '#ffbe7d',
  merge: '#8cd17d',
  finish: '#f1ce63',
};

/** An interval between two kept samples: rows a second when the phase moves rows, CPU cores by process. */
export interface Interval {
  from: number;
  to: number;
  phase: string;
  rowsPerSecond?: number;
  cores?: CpuSample;
}

/** Rows done at a sample: read's from the bytes read (the file's rows spread evenly), merge's from the checkpoint. */
function rowsAt(s: ImportSample, file: FileInfo | undefined): number | undefined {
  if (s.phase === 'read') return s.readBytes !== undefined && file ? (s.readBytes / file.bytes) * file.rows : undefined;
  return s.phase === 'merge' || s.phase === 'finish' ? s.merged : undefined;
}

/** The samples as intervals, thinned to at most MAX_INTERVALS; each interval's phase is its start's. */
export function intervals(series: readonly ImportSample[], file: FileInfo | undefined): Interval[] {
  if (series.length < 2) return [];
  const step = series.at(-1)!.at / MAX_INTERVALS;
  const thinned: ImportSample[] = [series[0]!];
  for (const s of series.slice(1, -1)) if (s.at - thinned.at(-1)!.at >= step) thinned.push(s);
  thinned.push(series.at(-1)!);
  return thinned.slice(1).map((b, k) => {
    const a = thinned[k]!;
    const dt = b.at - a.at;
    const ra = rowsAt(a, file);
    // Rows a second only within one phase: a read's bytes and a merge's checkpoint count different rows.
    const rb = b.phase === a.phase ? rowsAt(b, file) : undefined;
    const cores =
      a.cpu && b.cpu && dt > 0
        ? Object.fromEntries(Object.keys(b.cpu).map((p) => [p, Math.max(0, (b.cpu![p]! - (a.cpu![p] ?? 0)) / dt)]))
        : undefined;
    return {
      from: a.at,
      to: b.at,
      phase: a.phase,
      ...(ra !== undefined && rb !== undefined && dt > 0 && { rowsPerSecond: Math.max(0, (rb - ra) / dt) }),
      ...(cores && { cores }),
    };
  });
}

/** The phases' starts and ends in seconds from the upload's end, as the phase totals add up. */
function phaseSpans(run: ImportData): { phase: string; from: number; to: number }[] {
  let t = 0;
  return (run.phases ?? []).map((p) => ({ phase: p.phase, from: t, to: (t += p.seconds) }));
}

/** An older run's intervals: one per phase, its average rows a second (read and merge) and CPU. */
function phaseIntervals(run: ImportData, file: FileInfo | undefined): Interval[] {
  return phaseSpans(run).map((p) => {
    const secs = p.to - p.from;
    const cpu = run.cpu?.find((c) => c.phase === p.phase)?.cpu;
    // The read goes through every row of the file, the merge through the rows kept after dedupe.
    const rows = p.phase === 'read' ? file?.rows : p.phase === 'merge' ? run.view?.rowCount : undefined;
    return {
      ...p,
      ...(rows !== undefined && secs > 0 && { rowsPerSecond: rows / secs }),
      ...(cpu && secs > 0 && { cores: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, v / secs])) }),
    };
  });
}

/** The importer at the bottom of the stack, PostgreSQL above it, the API on top, anything else after. */
function stackOrder(names: string[]): string[] {
  const rank = (n: string) => (STACK.includes(n) ? STACK.indexOf(n) : STACK.length);
  return [...new Set(names)].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}
const STACK = ['importer', 'postgres', 'api'];

export function importChart(name: string, run: ImportData, file: FileInfo | undefined): Chart {
  const title = `${name}: phases, rows/s and CPU per process over ${run.seconds.toFixed(1)} s`;
  const notes: string[] = [];
  const perSecond = (run.series?.length ?? 0) >= 2;
  const spans = phaseSpans(run);
  const iv = perSecond ? intervals(run.series!, file) : phaseIntervals(run, file);
  if (!perSecond)
    notes.push(
      'This run recorded no per-second samples of its import: rows/s and CPU are each phase’s average ' +
        '(rows/s of read and merge: the file’s rows over the phase’s seconds).',
    );
  if (!iv.some((i) => i.cores)) notes.push('CPU per process: not recorded by this run.');
  const hasRates = iv.some((i) => i.rowsPerSecond !== undefined);
  if (!hasRates && !perSecond) notes.push('Rows/s: not recorded by this run.');
  // A rate needs two looks within one phase: an import of a few seconds may have none.
  if (!hasRates && perSecond)
    notes.push('Rows/s: no two looks (a second apart) fell within one phase of the read or merge.');
  if (hasRates && perSecond)
    notes.push(
      'Rows/s of the read: bytes of the file read, as rows (the file’s rows spread evenly); of the merge: its ' +
        'checkpoint, which moves a batch of 100,000 rows at a time, so a second sees none or a batch or two.',
    );
  const xMax = Math.max(run.seconds, spans.at(-1)?.to ?? 0, iv.at(-1)?.to ?? 0);
  const width = 860;
  let points = 0;
  const parts: string[] = [];

  // The phase band.
  const band = frame({ width, height: 62, top: 6, xMax, yMax: 1, xTitle: '', yTitle: '', yTicks: false });
  const bandH = 22;
  for (const p of spans) {
    const x = band.x(p.from);
    const w = Math.max(1, band.x(p.to) - x);
    points++;
    const fill = PHASE_COLOURS[p.phase] ?? '#ccc';
    const tip = `${p.phase}: ${(p.to - p.from).toFixed(1)} s from ${p.from.toFixed(1)} s`;
    parts.push(el('rect', { class: 'point', x, y: band.top, width: w, height: bandH, fill }, tip));
    if (w > 40) parts.push(el('text', { class: 'label', x: x + 4, y: band.top + 15 }, undefined, esc(p.phase)));
  }
  const bandSvg = svg(width, bandH + 12, parts.splice(0).join(''));

  // Rows a second.
  const rated = iv.filter((i) => i.rowsPerSecond !== undefined);
  const rows = frame({
    width,
    height: 170,
    xMax,
    yMax: Math.max(1, ...rated.map((i) => i.rowsPerSecond!)) * 1.1,
    xTitle: 'seconds from the end of the upload',
    yTitle: 'rows/s',
  });
  for (const i of rated) {
    const y = rows.y(i.rowsPerSecond!);
    points++;
    const tip = `${i.phase} ${i.from.toFixed(0)}-${i.to.toFixed(0)} s: ${short(i.rowsPerSecond!)} rows/s`;
    parts.push(el('line', { class: 'point rate', x1: rows.x(i.from), x2: rows.x(i.to), y1: y, y2: y }, tip));
  }
  const rowsSvg = svg(width, 170, rows.axes + parts.splice(0).join(''));

  // CPU stacked by process.
  const withCpu = iv.filter((i) => i.cores);
  const procs = stackOrder(withCpu.flatMap((i) => Object.keys(i.cores!)));
  const total = (c: CpuSample) => Object.values(c).reduce((a, b) => a + b, 0);
  const cpu = frame({
    width,
    height: 170,
    xMax,
    yMax: Math.max(1, ...withCpu.map((i) => total(i.cores!))) * 1.05,
    xTitle: 'seconds from the end of the upload',
    yTitle: 'CPU cores',
  });
  for (const i of withCpu) {
    let base = 0;
    const x = cpu.x(i.from);
    const w = Math.max(0.5, cpu.x(i.to) - x);
    for (const [k, p] of procs.entries()) {
      const v = i.cores![p] ?? 0;
      const y0 = cpu.y(base);
      const y1 = cpu.y(base + v);
      base += v;
      points++;
      const tip = `${p} ${i.from.toFixed(0)}-${i.to.toFixed(0)} s: ${v.toFixed(2)} cores`;
      parts.push(
        el('rect', { class: 'point', x, y: y1, width: w, height: Math.max(0, y0 - y1), fill: colour(p, k) }, tip),
      );
    }
  }
  const cpuSvg = svg(width, 170, cpu.axes + parts.splice(0).join(''));
  const cpuLegend = procs.length ? legend(procs.map((p, k) => ({ name: p, colour: colour(p, k) }))) : '';
  const body =
    `<div class="panel">${bandSvg}</div>` +
    (rated.length ? `<div class="panel">${rowsSvg}</div>` : '') +
    (withCpu.length ? `<div class="panel">${cpuSvg}${cpuLegend}</div>` : '');
  return { kind: 'import-timeline', title, points, body, notes };
}

export function importCharts(r: ResultData): Chart[] {
  const charts: Chart[] = [];
  for (const s of shapesOf(r))
    for (const [key, run, file] of [
      ['A', s.importA, s.files?.a],
      ['B', s.importB, s.files?.b],
    ] as const)
      if (run) charts.push(importChart(`import ${key} (${s.shape})`, run, file));
  return charts;
}

export const importSection = (r: ResultData): string => importCharts(r).map(figure).join('');

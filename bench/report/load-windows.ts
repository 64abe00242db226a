/**
 * The load steps: another account's requests while an import (the mixed step) or an export runs,
 * each window's p50 and p99 on a time axis over the import's phases, against the idle reference:
 * a band from the lower to the higher p99 of the idle spans before and after, its mean (the
 * reference the targets use, phase-latency.ts bracketP99) as a line, and the target's multiple of it
 * dashed. Runs from before the windows were recorded draw each phase's (or span's) p50 and p99.
 */
import { el, esc, figure, frame, legend, short, svg, type Chart } from './svg';
import type { ExportData, LatencyWindow, MergeOnlyMixed, MixedData, ResultData } from './model';
import { EXPORT_TARGETS, SERIES_SECONDS as EXPORT_WINDOW_SECONDS } from '../steps/export';

interface Segment {
  from: number;
  to: number;
  /** absent when the run did not count them (the mixed step's first form) */
  requests?: number;
  p50?: number;
  p99?: number;
}

interface LatencyChart {
  title: string;
  segments: Segment[];
  phases: { phase: string; from: number; to: number }[];
  idle: { before?: number; after?: number };
  targetRatio?: number;
  notes: string[];
}

const fmtMs = (v: number | undefined) => (v === undefined ? '-' : `${v.toFixed(1)} ms`);

export function latencyChart(c: LatencyChart): Chart {
  const idles = [c.idle.before, c.idle.after].filter((v): v is number => v !== undefined && Number.isFinite(v));
  const reference = idles.length ? idles.reduce((a, b) => a + b, 0) / idles.length : undefined;
  const limit = reference !== undefined && c.targetRatio ? reference * c.targetRatio : undefined;
  const drawn = c.segments.filter((s) => s.requests !== 0 && (s.p50 !== undefined || s.p99 !== undefined));
  if (drawn.length === 0)
    return { kind: 'load-windows', title: c.title, points: 0, body: '', notes: [...c.notes, 'No answers recorded.'] };
  const xMax = Math.max(...drawn.map((s) => s.to), ...c.phases.map((p) => p.to));
  const yMax = Math.max(...drawn.map((s) => s.p99 ?? s.p50 ?? 0), ...idles, limit ?? 0) * 1.08;
  const f = frame({ width: 860, height: 220, xMax, yMax, xTitle: 'seconds from the start of the load', yTitle: 'ms' });
  const parts: string[] = [];
  const hline = (cls: string, v: number, tip?: string) =>
    el('line', { class: cls, x1: f.left, x2: f.left + f.plotWidth, y1: f.y(v), y2: f.y(v) }, tip);
  for (const p of c.phases) {
    const x = f.x(p.from);
    const w = Math.max(0, f.x(p.to) - x);
    parts.push(el('rect', { class: 'phase', x, y: f.top, width: w, height: f.plotHeight }, p.phase));
    if (w > 36) parts.push(el('text', { class: 'phase-name', x: x + 3, y: f.top + 11 }, undefined, esc(p.phase)));
  }
  if (idles.length) {
    const lo = Math.min(...idles);
    const hi = Math.max(...idles);
    const tip = `idle p99 ${fmtMs(c.idle.before)} before, ${fmtMs(c.idle.after)} after`;
    const band = { x: f.left, y: f.y(hi), width: f.plotWidth, height: Math.max(1.5, f.y(lo) - f.y(hi)) };
    parts.push(el('rect', { class: 'idle-band', ...band }, tip), hline('idle-ref', reference!));
  }
  if (limit !== undefined)
    parts.push(hline('limit', limit, `target: p99 at most ${c.targetRatio} × idle (${fmtMs(limit)})`));
  let points = 0;
  for (const [key, dash] of [
    ['p50', true],
    ['p99', false],
  ] as const) {
    const at = drawn.filter((s) => s[key] !== undefined);
    const path = at.map((s) => `${f.x((s.from + s.to) / 2).toFixed(1)},${f.y(s[key]!).toFixed(1)}`).join(' ');
    parts.push(el('polyline', { class: `series ${key}`, points: path, ...(dash && { 'stroke-dasharray': '4 3' }) }));
    for (const s of at) {
      points++;
      const ratio = key === 'p99' && reference ? `, ${(s[key]! / reference).toFixed(2)} × idle` : '';
      const tip = `${s.from.toFixed(0)}-${s.to.toFixed(0)} s: ${key} ${fmtMs(s[key])}${ratio}${answers(s)}`;
      parts.push(el('circle', { class: `point ${key}`, cx: f.x((s.from + s.to) / 2), cy: f.y(s[key]!), r: 2.5 }, tip));
    }
  }
  const key = legend([
    { name: 'p99', colour: '#e15759' },
    { name: 'p50 (dashed)', colour: '#4e79a7' },
    { name: 'idle p99, before to after (band; line: their mean)', colour: '#59a14f', dashed: true },
    ...(limit !== undefined ? [{ name: `target ${c.targetRatio} × idle`, colour: '#e15759', dashed: true }] : []),
  ]);
  const body = svg(f.width, f.height, f.axes + parts.join('')) + key;
  return { kind: 'load-windows', title: c.title, points, body, notes: c.notes };
}

const answers = (s: Segment) => (s.requests === undefined ? '' : `, ${short(s.requests)} answers`);

/** Windows as segments; the last one ends with the span (`end`), so its point sits within it. */
const windowSegments = (windows: readonly LatencyWindow[], seconds: number, end: number): Segment[] =>
  windows.map((w) => ({ from: w.at, to: Math.min(w.at + seconds, end), requests: w.requests, p50: w.p50, p99: w.p99 }));

/** The mixed step's first form: each kind's one span during the merge against the idle span before it. */
function mergeOnlyCharts(m: MergeOnlyMixed): Chart[] {
  return m.idle.map((idle) => {
    const merging = m.merging.find((k) => k.scenario === idle.scenario);
    return latencyChart({
      title: `mixed: another account’s ${idle.scenario} while import A merges`,
      segments: merging ? [{ from: 0, to: m.seconds, ...merging }] : [],
      phases: [{ phase: 'merge', from: 0, to: m.seconds }],
      idle: { before: idle.p99 },
      targetRatio: m.p99RatioTarget,
      notes: [
        `This run measured the load over ${m.seconds} s of the merge only, against an idle span before the ` +
          'import: no phases, no 10 s windows, no idle span after.',
      ],
    });
  });
}

/** The mixed step: one chart per request kind over the import's phases. */
export function mixedCharts(m: MixedData | MergeOnlyMixed): Chart[] {
  if ('merging' in m) return mergeOnlyCharts(m);
  const kinds = m.idle.kinds.map((k) => k.scenario);
  const shapeNote = m.shape && m.shape !== 'wide' ? ` (${m.shape})` : '';
  const series = m.series;
  let t = 0;
  // An older run has each phase's seconds only, laid end to end in the order the step lists them.
  const phases = series
    ? series.phases.slice(0, -1).map((p, k) => ({ phase: p.phase, from: p.at, to: series.phases[k + 1]!.at }))
    : m.phases.filter((p) => p.seconds > 0).map((p) => ({ phase: p.name, from: t, to: (t += p.seconds) }));
  return kinds.map((scenario) => {
    const kind = (span: MixedData['idle'] | undefined) => span?.kinds.find((k) => k.scenario === scenario);
    const windows = series?.kinds.find((k) => k.scenario === scenario)?.windows;
    const segments = windows
      ? windowSegments(windows, series!.windowSeconds, series!.phases.at(-1)?.at ?? Infinity)
      : phases.map((p) => ({ ...p, ...kind(m.phases.find((s) => s.name === p.phase))! }));
    const notes = windows
      ? []
      : ['This run recorded no 10 s windows: each point is a whole phase’s p50 or p99 (the phase-latency table).'];
    if (!m.idleAfter) notes.push('Idle after the import: not recorded by this run; the band is the idle span before.');
    return latencyChart({
      title: `mixed: another account’s ${scenario} while import A${shapeNote} runs`,
      segments,
      phases,
      idle: { before: kind(m.idle)?.p99, after: kind(m.idleAfter)?.p99 },
      targetRatio: m.p99RatioTarget,
      notes,
    });
  });
}

/** The export step: one chart per export under load, against the idle spans before and after it. */
export function exportCharts(e: ExportData): Chart[] {
  // Before `idles`, one idle span before the exports and one after them bracketed both.
  const before = (k: number) => (e.idles ? e.idles[k] : e.idle);
  const after = (k: number) => (e.idles ? e.idles[k + 1] : e.idleAfter);
  return e.loaded.map(({ load }, k) => {
    const windows = load.series;
    const segments = windows?.length
      ? windowSegments(windows, EXPORT_WINDOW_SECONDS, load.seconds)
      : [{ from: 0, to: load.seconds, requests: load.requests, p50: load.p50, p99: load.p99 }];
    return latencyChart({
      title: `export: another account’s GET while ${load.name} runs`,
      segments,
      phases: [{ phase: load.name, from: 0, to: load.seconds }],
      idle: { before: before(k)?.p99, after: after(k)?.p99 },
      targetRatio: EXPORT_TARGETS.p99XIdle,
      notes: [
        ...(windows?.length ? [] : ['This run recorded no 10 s windows: the point is the whole span’s p50 and p99.']),
        ...(after(k) ? [] : ['No idle span after the export in this run: the band is the idle span before.']),
      ],
    });
  });
}

export function loadCharts(r: ResultData): Chart[] {
  return [...(r.mixed ? mixedCharts(r.mixed) : []), ...(r.export ? exportCharts(r.export) : [])];
}

export const loadSection = (r: ResultData): string => loadCharts(r).map(figure).join('');

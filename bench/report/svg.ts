/**
 * What every chart of the report shares: escaping, axes with round ticks, and the figure around a
 * chart. Each drawn datum carries class `point` and a <title> with its value (a tooltip in the
 * browser), and the figure says how many it drew in `data-points`: the test counts one against the
 * other. A chart without data says what the run did not record, in words, instead of drawing.
 */

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };
export const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ESCAPES[c]!);

/**
 * An element: its attributes (numbers to 0.1 px: a long import's thousands of rects stay small), a
 * tooltip as its <title>, and what it holds.
 */
export function el(tag: string, attrs: Record<string, string | number>, tip?: string, content = ''): string {
  const list = Object.entries(attrs)
    .map(([k, v]) => ` ${k}="${typeof v === 'number' ? +v.toFixed(1) : esc(v)}"`)
    .join('');
  const inner = (tip === undefined ? '' : `<title>${esc(tip)}</title>`) + content;
  return inner ? `<${tag}${list}>${inner}</${tag}>` : `<${tag}${list}/>`;
}

/** A number short enough for a tick or a label: 3 significant digits, k and M for the large. */
export function short(n: number): string {
  const a = Math.abs(n);
  if (a >= 1e6) return `${+(n / 1e6).toPrecision(3)}M`;
  if (a >= 1e4) return `${+(n / 1e3).toPrecision(3)}k`;
  if (a >= 100 || a === 0) return String(Math.round(n));
  return String(+n.toPrecision(3));
}

/** The smallest 1, 2 or 5 × 10^k at or above `v` (the axis's end), and the ticks up to it. */
export function axisTicks(v: number, count = 5): { max: number; ticks: number[] } {
  if (!(v > 0) || !Number.isFinite(v)) return { max: 1, ticks: [0, 1] };
  const raw = v / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw)!;
  const max = Math.ceil(v / step - 1e-9) * step;
  const ticks: number[] = [];
  for (let t = 0; t <= max + step / 2; t += step) ticks.push(+t.toPrecision(12));
  return { max, ticks };
}

/** Colours by role, the same in every chart: a process or a request kind keeps its colour. */
const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#9c755f'];
const NAMED: Record<string, string> = {
  importer: '#4e79a7',
  postgres: '#f28e2b',
  api: '#59a14f',
  bench: '#bab0ac',
  GET: '#4e79a7',
  POST: '#f28e2b',
  PATCH: '#59a14f',
};
export function colour(name: string, index: number): string {
  return NAMED[name] ?? PALETTE[index % PALETTE.length]!;
}

export interface Frame {
  width: number;
  height: number;
  left: number;
  top: number;
  plotWidth: number;
  plotHeight: number;
  x: (v: number) => number;
  y: (v: number) => number;
  xMax: number;
  yMax: number;
  /** grid, ticks and axis titles */
  axes: string;
}

/** A plot area with a linear x axis from 0 to `xMax` and y from 0 to `yMax`, both rounded up. */
export function frame(opts: {
  width?: number;
  height?: number;
  xMax: number;
  yMax: number;
  xTitle: string;
  yTitle: string;
  left?: number;
  top?: number;
  /** false: a chart of rows (bars by name) that has no y scale to show */
  yTicks?: boolean;
  /** false: a chart of groups (bars by kind) that has no x scale to show */
  xTicks?: boolean;
}): Frame {
  const width = opts.width ?? 860;
  const height = opts.height ?? 240;
  const left = opts.left ?? 56;
  const top = opts.top ?? 10;
  const bottom = 34;
  const plotWidth = width - left - 16;
  const plotHeight = height - top - bottom;
  const xs = axisTicks(opts.xMax, 8);
  const ys = axisTicks(opts.yMax, 4);
  const x = (v: number) => left + (v / xs.max) * plotWidth;
  const y = (v: number) => top + plotHeight - (v / ys.max) * plotHeight;
  const parts: string[] = [];
  for (const t of opts.yTicks === false ? [] : ys.ticks)
    parts.push(
      `<line class="grid" x1="${left}" x2="${left + plotWidth}" y1="${y(t)}" y2="${y(t)}"/>`,
      `<text class="tick" x="${left - 4}" y="${y(t) + 4}" text-anchor="end">${short(t)}</text>`,
    );
  for (const t of opts.xTicks === false ? [] : xs.ticks)
    parts.push(`<text class="tick" x="${x(t)}" y="${top + plotHeight + 14}" text-anchor="middle">${short(t)}</text>`);
  parts.push(
    `<line class="axis" x1="${left}" x2="${left + plotWidth}" y1="${y(0)}" y2="${y(0)}"/>`,
    `<text class="title" x="${left + plotWidth / 2}" y="${height - 4}" text-anchor="middle">${esc(opts.xTitle)}</text>`,
    `<text class="title" transform="translate(12 ${top + plotHeight / 2}) rotate(-90)" text-anchor="middle">` +
      `${esc(opts.yTitle)}</text>`,
  );
  return { width, height, left, top, plotWidth, plotHeight, x, y, xMax: xs.max, yMax: ys.max, axes: parts.join('') };
}

export const svg = (width: number, height: number, body: string) =>
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">` +
  `${body}</svg>`;

/** A legend as one line of coloured names. */
export const legend = (entries: { name: string; colour: string; dashed?: boolean }[]) =>
  `<p class="legend">${entries
    .map((e) => `<span><i style="background:${e.colour}${e.dashed ? ';opacity:.45' : ''}"></i>${esc(e.name)}</span>`)
    .join('')}</p>`;

export interface Chart {
  /** the chart's kind, one per file of bench/report */
  kind: string;
  title: string;
  /** the data points drawn: each an element of class `point` in `body` */
  points: number;
  body: string;
  /** what the reader should know: what the run did not record, how a figure was derived */
  notes: string[];
}

export function figure(c: Chart): string {
  const notes = c.notes.map((n) => `<p class="note">${esc(n)}</p>`).join('');
  return (
    `<figure class="chart" data-chart="${esc(c.kind)}" data-points="${c.points}">` +
    `<figcaption>${esc(c.title)}</figcaption>${c.body}${notes}</figure>`
  );
}

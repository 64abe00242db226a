/**
 * Each import against its peers on the same file, one chart per file shape: L1 (a bare COPY of file
 * A), the dba step (the hand-written COPY + upsert), pgloader when the result has it, and import A
 * and B, as horizontal bars of seconds (shorter is faster), each labelled with rows/s and × L1.
 */
import { el, esc, figure, frame, short, svg, type Chart } from './svg';
import { shapesOf, type ResultData, type ShapeData, type Timed } from './model';

interface Bar {
  name: string;
  file: 'A' | 'B';
  seconds: number;
  colour: string;
}

const PEER_COLOURS = { l1: '#9c755f', dba: '#b07aa1', pgloader: '#76b7b2', import: '#4e79a7' };

/** The bars of one shape, by file, in the order the text table prints them. */
export function peerBars(s: ShapeData): Bar[] {
  const bars: Bar[] = [];
  const add = (name: string, file: 'A' | 'B', t: Timed | undefined, colour: string) => {
    if (t && Number.isFinite(t.seconds)) bars.push({ name, file, seconds: t.seconds, colour });
  };
  add('L1 COPY', 'A', s.l1, PEER_COLOURS.l1);
  add('dba A (COPY + upsert)', 'A', s.dba?.a, PEER_COLOURS.dba);
  add('pgloader A', 'A', s.pgloader?.a, PEER_COLOURS.pgloader);
  add('import A', 'A', s.importA, PEER_COLOURS.import);
  add('dba B (COPY + upsert)', 'B', s.dba?.b, PEER_COLOURS.dba);
  add('pgloader B', 'B', s.pgloader?.b, PEER_COLOURS.pgloader);
  add('import B', 'B', s.importB, PEER_COLOURS.import);
  return bars;
}

/**
 * `which`: 'own' for the shape's files, 'flat' for its 1M files in a larger run (the pgloader step
 * loads only those: on the 25M files it would add hours).
 */
function shapeChart(s: ShapeData, which: 'own' | 'flat' = 'own'): Chart {
  const bars = peerBars(s);
  const of = which === 'flat' ? `${s.shape} shape, the 1M files` : `${s.shape} shape`;
  const title = `Imports against their peers, ${of}: seconds (shorter is faster)`;
  const pgloaderNote = s.flat?.pgloader
    ? 'pgloader: on the 1M files only (the chart below).'
    : 'pgloader: not in this run.';
  const notes = [
    which === 'own' && !s.l1 && 'L1: not in this run.',
    !s.dba && 'dba step: not in this run.',
    !s.pgloader && pgloaderNote,
    !s.importA && 'Imports: not in this run.',
  ].filter((n): n is string => typeof n === 'string');
  const rowH = 22;
  const gap = 12;
  const files = [...new Set(bars.map((b) => b.file))];
  const height = bars.length * rowH + files.length * gap + 44;
  const f = frame({
    width: 860,
    height,
    left: 170,
    top: 8,
    // Room right of the longest bar for its label.
    xMax: Math.max(...bars.map((b) => b.seconds)) * 1.5,
    yMax: 1,
    xTitle: 'seconds',
    yTitle: '',
    yTicks: false,
  });
  const l1 = s.l1?.seconds;
  const rowsOf = (file: 'A' | 'B') => (file === 'A' ? s.files?.a?.rows : s.files?.b?.rows);
  const parts: string[] = [];
  let y = f.top + 4;
  for (const file of files) {
    for (const b of bars.filter((x) => x.file === file)) {
      const rows = rowsOf(file);
      const label = [
        `${b.seconds.toFixed(2)} s`,
        rows ? `${short(rows / b.seconds)} rows/s` : '',
        l1 && b.name !== 'L1 COPY' ? `${(b.seconds / l1).toFixed(2)} × L1` : '',
      ].filter(Boolean);
      const w = f.x(b.seconds) - f.left;
      const middle = y + rowH / 2 + 4;
      const bar = { class: 'point', x: f.left, y: y + 3, width: Math.max(1, w), height: rowH - 6, fill: b.colour };
      parts.push(
        el('text', { class: 'label', x: f.left - 6, y: middle, 'text-anchor': 'end' }, undefined, esc(b.name)),
        el('rect', bar, `${b.name}: ${label.join(', ')}`),
        el('text', { class: 'value', x: f.left + w + 4, y: middle }, undefined, esc(label.join(' · '))),
      );
      y += rowH;
    }
    y += gap;
  }
  return { kind: 'peers', title, points: bars.length, body: svg(f.width, height, f.axes + parts.join('')), notes };
}

export function peerCharts(r: ResultData): Chart[] {
  return shapesOf(r).flatMap((s) => {
    const flat: ShapeData | undefined = s.flat && { ...s.flat, shape: s.shape };
    return [
      ...(peerBars(s).length > 0 ? [shapeChart(s)] : []),
      ...(flat && peerBars(flat).length > 0 ? [shapeChart(flat, 'flat')] : []),
    ];
  });
}

export const peerSection = (r: ResultData): string => peerCharts(r).map(figure).join('');

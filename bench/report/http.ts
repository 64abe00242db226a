/**
 * The HTTP step: each request kind's req/s against each server (the bare baseline server, the API
 * without rate limits, the API), as grouped bars, and the step's table beside them.
 */
import { colour, el, esc, figure, frame, legend, short, svg, type Chart } from './svg';
import type { HttpRowData, ResultData } from './model';

/** The bare server first: the bars read from the floor every request pays to the service's cost. */
const TARGET_ORDER = ['baseline', 'api-no-limits', 'api'];
const rank = (t: string) => (TARGET_ORDER.includes(t) ? TARGET_ORDER.indexOf(t) : TARGET_ORDER.length);

export function httpChart(rows: readonly HttpRowData[]): Chart {
  const title = 'HTTP step: req/s of each request against the bare server and the API';
  const scenarios = [...new Set(rows.map((r) => r.scenario))];
  const targets = [...new Set(rows.map((r) => r.target))].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const f = frame({
    width: 860,
    height: 240,
    xMax: 1,
    yMax: Math.max(...rows.map((r) => r.reqPerSec)) * 1.1,
    xTitle: '',
    yTitle: 'req/s',
    xTicks: false,
  });
  const group = f.plotWidth / scenarios.length;
  const barW = Math.min(60, (group * 0.8) / targets.length);
  const parts: string[] = [];
  let points = 0;
  for (const [g, scenario] of scenarios.entries()) {
    const x0 = f.left + g * group + (group - barW * targets.length) / 2;
    parts.push(
      `<text class="label" x="${f.left + (g + 0.5) * group}" y="${f.top + f.plotHeight + 14}" text-anchor="middle">` +
        `${esc(scenario)}</text>`,
    );
    for (const [k, target] of targets.entries()) {
      const r = rows.find((x) => x.scenario === scenario && x.target === target);
      if (!r) continue;
      const y = f.y(r.reqPerSec);
      points++;
      const x = x0 + k * barW;
      const tip = `${scenario} ${target}: ${Math.round(r.reqPerSec)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms`;
      const fill = colour(target, k);
      parts.push(
        el('rect', { class: 'point', x, y, width: barW - 2, height: f.y(0) - y, fill }, tip),
        el(
          'text',
          { class: 'value', x: x + barW / 2 - 1, y: y - 3, 'text-anchor': 'middle' },
          undefined,
          short(r.reqPerSec),
        ),
      );
    }
  }
  const key = legend(targets.map((t, k) => ({ name: t, colour: colour(t, k) })));
  const body = svg(f.width, f.height, f.axes + parts.join('')) + key + httpTable(rows);
  return { kind: 'http', title, points, body, notes: [] };
}

function httpTable(rows: readonly HttpRowData[]): string {
  const head = ['request', 'server', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', '× baseline', 'target'];
  const cells = rows.map((r) => [
    r.scenario,
    r.target,
    String(Math.round(r.reqPerSec)),
    r.p50.toFixed(1),
    r.p99.toFixed(1),
    String(r.non2xx),
    String(r.errors),
    r.ratio === undefined ? '-' : r.ratio.toFixed(2),
    r.minRatio === undefined ? '-' : `≥ ${r.minRatio}`,
  ]);
  return (
    `<table><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>` +
    cells.map((c) => `<tr>${c.map((v) => `<td>${esc(v)}</td>`).join('')}</tr>`).join('') +
    '</tbody></table>'
  );
}

export const httpSection = (r: ResultData): string => (r.http?.length ? figure(httpChart(r.http)) : '');

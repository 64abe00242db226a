import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { axisTicks, figure } from './svg';
import { intervals, importChart } from './import-timeline';
import { peerCharts } from './peers';
import { latencyChart, mixedCharts } from './load-windows';
import { targetsChart } from './targets';
import { renderReport } from './page';
import type { ImportData, MixedData, ResultData } from './model';

/** A made-up small run shaped as the bench writes it, with every chart's data (fixtures/small-run.json). */
const fixture = (await Bun.file(join(import.meta.dir, 'fixtures', 'small-run.json')).json()) as ResultData;
const RESULTS = join(import.meta.dir, '..', 'results');

/** Each figure of a page: its kind, the points it says it drew, the `point` elements it holds, its notes. */
function figures(html: string) {
  return [...html.matchAll(/<figure class="chart" data-chart="([^"]+)" data-points="(\d+)">([\s\S]*?)<\/figure>/g)].map(
    ([, kind, said, inner]) => ({
      kind: kind!,
      said: Number(said),
      drawn: (inner!.match(/class="point[ "]/g) ?? []).length,
      notes: [...inner!.matchAll(/<p class="note">([^<]*)<\/p>/g)].map((m) => m[1]!),
    }),
  );
}

describe('axes', () => {
  test('end at the next 1, 2 or 5 step above the data, ticks from 0', () => {
    expect(axisTicks(87)).toEqual({ max: 100, ticks: [0, 20, 40, 60, 80, 100] });
    expect(axisTicks(0.37, 4).max).toBe(0.4);
    expect(axisTicks(12_345, 5).ticks.at(-1)).toBe(15_000);
    expect(axisTicks(0)).toEqual({ max: 1, ticks: [0, 1] });
  });
});

describe('peer bars', () => {
  test('draw L1, dba, pgloader and the imports of each file, pgloader as soon as the result has it', () => {
    const [chart] = peerCharts(fixture);
    expect(chart!.points).toBe(7);
    expect(chart!.body).toContain('pgloader A');
    expect(chart!.body).toContain('pgloader B');
    expect(chart!.notes).toEqual([]);
    const without = structuredClone(fixture);
    delete without.shapes![0]!.pgloader;
    const [older] = peerCharts(without);
    expect(older!.points).toBe(5);
    expect(older!.notes).toContain('pgloader: not in this run.');
  });

  test("a larger run's 1M files get a chart of their own, with pgloader, which loads only those", () => {
    const big = structuredClone(fixture);
    const shape = big.shapes![0]!;
    const { dba, pgloader, importA, importB, files } = shape;
    shape.flat = { dba, pgloader, importA, importB, files };
    delete shape.pgloader;
    const [own, flat, ...more] = peerCharts(big);
    expect(more).toEqual([]);
    expect(own!.points).toBe(5);
    expect(own!.notes).toEqual(['pgloader: on the 1M files only (the chart below).']);
    expect(flat!.title).toContain('wide shape, the 1M files');
    expect(flat!.points).toBe(6); // dba, pgloader and import of each file; no L1 on them
    expect(flat!.body).toContain('pgloader B');
    expect(flat!.notes).toEqual([]);
  });

  test('read an older result, whose L1, dba and imports sat at the top, as the wide shape', () => {
    const { l1, dba, importA: a, importB: b, files } = fixture.shapes![0]!;
    const old: ResultData = { l1, dba, files, imports: { a, b }, options: { steps: ['l1', 'a', 'b'] } };
    const [chart] = peerCharts(old);
    expect(chart!.title).toContain('wide shape');
    expect(chart!.points).toBe(5);
  });
});

describe('import timeline', () => {
  const a = fixture.shapes![0]!.importA!;
  const file = fixture.shapes![0]!.files!.a!;

  test('rows/s of the read from the bytes read, of the merge from the checkpoint, CPU from second to second', () => {
    const iv = intervals(a.series!, file);
    const read = iv.find((i) => i.phase === 'read' && i.rowsPerSecond !== undefined)!;
    // A fifth of the file a second: 20,000 rows over 5 s.
    expect(read.rowsPerSecond!).toBeCloseTo(4000, 0);
    expect(iv.find((i) => i.phase === 'merge')!.rowsPerSecond).toBeCloseTo(4000, 0);
    expect(iv.find((i) => i.phase === 'dedupe')!.rowsPerSecond).toBeUndefined();
    expect(read.cores!.importer).toBeCloseTo(0.9, 5);
    expect(read.cores!.postgres).toBeCloseTo(0.2, 5);
  });

  test('thins a long series to at most 300 intervals, keeping its ends', () => {
    const long = Array.from({ length: 3001 }, (_, t) => ({ at: t, phase: 'merge', merged: t * 10 }));
    const iv = intervals(long, file);
    expect(iv.length).toBeLessThanOrEqual(300);
    expect(iv[0]!.from).toBe(0);
    expect(iv.at(-1)!.to).toBe(3000);
    expect(iv.every((i) => Math.abs(i.rowsPerSecond! - 10) < 1e-9)).toBe(true);
  });

  test('an older run without samples draws phase averages and says so; without CPU says it was not recorded', () => {
    const old: ImportData = { seconds: a.seconds, phases: a.phases, view: a.view };
    const chart = importChart('import A', old, file);
    expect(chart.notes.join(' ')).toContain('no per-second samples');
    expect(chart.notes).toContain('CPU per process: not recorded by this run.');
    // Five phase bands, the read's and the merge's averages.
    expect(chart.points).toBe(7);
  });
});

describe('load windows', () => {
  test('the idle band spans the p99s before and after; the target line is its mean times the ratio', () => {
    const chart = latencyChart({
      title: 't',
      segments: [{ from: 0, to: 10, requests: 100, p50: 5, p99: 30 }],
      phases: [],
      idle: { before: 10, after: 20 },
      targetRatio: 2,
      notes: [],
    });
    expect(chart.points).toBe(2);
    expect(chart.body).toContain('idle p99 10.0 ms before, 20.0 ms after');
    expect(chart.body).toContain('at most 2 × idle (30.0 ms)');
    expect(chart.body).toContain('p99 30.0 ms, 2.00 × idle');
  });

  test('the mixed step draws a chart per kind from its windows, or per phase in an older run', () => {
    const charts = mixedCharts(fixture.mixed!);
    expect(charts.map((c) => c.points)).toEqual([6, 6, 6]);
    const old = structuredClone(fixture.mixed!) as MixedData;
    delete old.series;
    const older = mixedCharts(old);
    expect(older[0]!.points).toBe(10);
    expect(older[0]!.notes[0]).toContain('no 10 s windows');
  });
});

describe('targets', () => {
  test('each with PASS, MISS or SKIP', () => {
    const body = targetsChart(fixture.targets!).body;
    expect(body.match(/class="verdict">(\w+)</g)).toEqual([
      'class="verdict">PASS<',
      'class="verdict">MISS<',
      'class="verdict">SKIP<',
    ]);
  });
});

describe('the page', () => {
  test("the fixture's page has every kind of chart, each with the points it says it drew, and nothing to fetch", () => {
    const html = renderReport(fixture);
    const all = figures(html);
    expect(new Set(all.map((f) => f.kind))).toEqual(
      new Set(['peers', 'import-timeline', 'load-windows', 'http', 'targets']),
    );
    for (const f of all) {
      expect(f.drawn).toBe(f.said);
      expect(f.said).toBeGreaterThan(0);
    }
    expect(html).not.toMatch(/<script|<link|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
  });

  test('every recorded result in bench/results draws: each chart its points, or a note of what is missing', () => {
    const files = readdirSync(RESULTS).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThan(0);
    for (const name of files) {
      const result = JSON.parse(readFileSync(join(RESULTS, name), 'utf8')) as ResultData;
      // The file's name and the chart's kind in what is compared: a failure says which result and chart.
      for (const f of figures(renderReport(result))) {
        const at = { name, kind: f.kind };
        expect({ ...at, drawn: f.drawn }).toEqual({ ...at, drawn: f.said });
        if (f.said === 0) expect({ ...at, notes: f.notes.length }).not.toEqual({ ...at, notes: 0 });
      }
    }
  });

  test('a chart says what it did not draw', () => {
    expect(figure({ kind: 'k', title: 'T', points: 0, body: '', notes: ['not recorded'] })).toBe(
      '<figure class="chart" data-chart="k" data-points="0"><figcaption>T</figcaption>' +
        '<p class="note">not recorded</p></figure>',
    );
  });
});

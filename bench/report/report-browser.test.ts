import { afterAll, beforeAll, expect, test } from 'bun:test';
import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'puppeteer-core';
import { launchChromium } from '../../test/helpers/chromium';
import type { ResultData } from './model';
import { writeHtmlBeside } from './command';
import { writePngBeside } from './screenshot';

/** Where the screenshot stays for a person (or CI) to look at: the ignored data folder, beside the test databases'. */
const ARTIFACTS = join(import.meta.dir, '..', '..', '.data', 'test-artifacts');
const SCREENSHOT = join(ARTIFACTS, 'bench-report.png');

let browser: Browser;
let dir: string;

beforeAll(async () => {
  browser = await launchChromium();
  dir = await mkdtemp(join(tmpdir(), 'bench-report-'));
}, 600_000);

afterAll(async () => {
  await browser?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

test("a small run's report renders in chromium, every chart with its data points, nothing fetched", async () => {
  const fixture = (await Bun.file(join(import.meta.dir, 'fixtures', 'small-run.json')).json()) as ResultData;
  const html = await writeHtmlBeside(join(dir, 'small-run.json'), fixture);
  const url = `file://${html}`;
  const page = await browser.newPage();
  await page.setViewport({ width: 960, height: 900 });
  const requested: string[] = [];
  await page.setRequestInterception(true);
  page.on('request', (request) => {
    requested.push(request.url());
    // The file itself and nothing else: a chart that fetched anything would fail the test below.
    if (request.url() === url) void request.continue();
    else void request.abort();
  });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url, { waitUntil: 'load' });

  const charts = await page.$$eval('figure.chart', (figures) =>
    figures.map((f) => {
      const points = [...f.querySelectorAll('.point')];
      // Drawn: it has a size and lies within its own SVG (or table), not clipped off its chart.
      const shown = points.filter((p) => {
        const r = p.getBoundingClientRect();
        const host = (p.closest('svg') ?? p.closest('table'))!.getBoundingClientRect();
        const within =
          r.left >= host.left - 1 && r.right <= host.right + 1 && r.top >= host.top - 1 && r.bottom <= host.bottom + 1;
        return within && (r.width > 0 || r.height > 0);
      });
      return {
        kind: f.getAttribute('data-chart'),
        said: Number(f.getAttribute('data-points')),
        drawn: points.length,
        shown: shown.length,
      };
    }),
  );
  expect(new Set(charts.map((c) => c.kind))).toEqual(
    new Set(['peers', 'import-timeline', 'load-windows', 'http', 'targets']),
  );
  for (const c of charts) {
    expect(c.said).toBeGreaterThan(0);
    expect(c).toEqual({ ...c, drawn: c.said, shown: c.said });
  }
  // The verdicts as the text report prints them.
  const verdicts = await page.$$eval('.targets .verdict', (cells) => cells.map((c) => c.textContent));
  expect(verdicts).toEqual(['PASS', 'MISS', 'SKIP']);

  expect(requested).toEqual([url]);
  expect(errors).toEqual([]);
  await page.close();

  // `bun run bench report --png`'s picture of it, kept for a person (or CI) to look at.
  const png = await writePngBeside(html, browser);
  expect(png).toBe(join(dir, 'small-run.png'));
  const bytes = new Uint8Array(await Bun.file(png).arrayBuffer());
  expect([...bytes.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]); // PNG's signature
  // Its width is the viewport's, its height the whole page's (far more than one screen).
  const view = new DataView(bytes.buffer);
  expect(view.getUint32(16)).toBe(1280);
  expect(view.getUint32(20)).toBeGreaterThan(900);
  expect(bytes.length).toBeGreaterThan(20_000);
  await mkdir(ARTIFACTS, { recursive: true });
  await copyFile(png, SCREENSHOT);
}, 60_000);

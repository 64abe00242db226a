import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { Browser } from 'puppeteer-core';
import { serveTestApi, type ServedApi } from '../helpers/api-server';
import { launchChromium } from '../helpers/chromium';

let api: ServedApi;
let browser: Browser;

beforeAll(async () => {
  browser = await launchChromium();
  api = await serveTestApi();
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
});

test('/docs renders the operations with every request to the API itself', async () => {
  const origin = `http://127.0.0.1:${api.port}`;
  const page = await browser.newPage();
  const requested: string[] = [];
  // Inline data: URLs (the stylesheet's icons) are no request to anywhere.
  const local = (url: string) => url.startsWith(`${origin}/`) || url.startsWith('data:');
  await page.setRequestInterception(true);
  page.on('request', (request) => {
    requested.push(request.url());
    // Nothing leaves the machine: anything not the API's own is refused (and fails the test below).
    if (local(request.url())) void request.continue();
    else void request.abort();
  });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));

  const answer = await page.goto(`${origin}/docs`, { waitUntil: 'networkidle0' });
  expect(answer?.status()).toBe(200);
  await page.waitForSelector('.opblock-summary', { timeout: 30_000 });
  const operations = await page.$$eval('.opblock-summary', (blocks) =>
    blocks.map((b) => ({
      method: b.querySelector('.opblock-summary-method')?.textContent?.trim(),
      path: b.querySelector('.opblock-summary-path')?.getAttribute('data-path'),
      summary: b.querySelector('.opblock-summary-description')?.textContent?.trim(),
    })),
  );
  const listed = operations.map((o) => `${o.method} ${o.path}`);
  expect(listed).toContain('GET /v1/contacts/{emailMd5}');
  expect(listed).toContain('POST /v1/contacts');
  expect(listed).toContain('GET /v1/brands');
  expect(listed).toContain('POST /v1/contact-imports');
  expect(operations.find((o) => o.method === 'GET' && o.path === '/v1/brands')?.summary).toBe('List brands');
  expect(operations.every((o) => o.summary)).toBe(true);
  expect(await page.title()).toBe('Contact, Brand and Suppression Management API');

  expect(requested).toContain(`${origin}/docs/json`);
  expect(requested.filter((u) => !local(u))).toEqual([]);
  expect(errors).toEqual([]);
  await page.close();
}, 120_000);

test('the assets are served by the service, and nothing else under /docs/assets', async () => {
  const origin = `http://127.0.0.1:${api.port}`;
  const css = await fetch(`${origin}/docs/assets/swagger-ui.css`);
  expect(css.status).toBe(200);
  expect(css.headers.get('content-type')).toStartWith('text/css');
  const js = await fetch(`${origin}/docs/assets/swagger-ui-bundle.js`);
  expect(js.status).toBe(200);
  expect((await js.text()).length).toBeGreaterThan(100_000);
  const html = await (await fetch(`${origin}/docs`)).text();
  expect(html).not.toMatch(/https?:\/\//);
  for (const name of ['package.json', '..%2Fpackage.json', 'index.html']) {
    const r = await fetch(`${origin}/docs/assets/${name}`);
    expect(r.status).toBe(404);
    expect(r.headers.get('content-type')).toStartWith('application/problem+json');
  }
});

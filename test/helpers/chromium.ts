/**
 * The headless browser of the tests that render a page (test/http/docs-browser.test.ts, the bench's
 * report in bench/report/report-browser.test.ts).
 */
import { existsSync } from 'node:fs';
import puppeteer, { type Browser } from 'puppeteer-core';

/** Debian's chromium, installed with apt-get when missing (as src/embedded/redis.ts installs redis-server). */
async function findChromium(): Promise<string> {
  const found = Bun.which('chromium') ?? (existsSync('/usr/bin/chromium') ? '/usr/bin/chromium' : null);
  if (found) return found;
  if (process.getuid?.() !== 0) throw new Error('chromium not found: sudo apt-get install -y chromium');
  const apt = async (...args: string[]) => {
    const proc = Bun.spawn(['apt-get', '-o', 'DPkg::Lock::Timeout=300', ...args], {
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const err = await new Response(proc.stderr).text();
    return { code: await proc.exited, err };
  };
  let r = await apt('install', '-y', 'chromium');
  if (r.code !== 0) {
    // A fresh machine may have no package lists yet: update once, then retry.
    await apt('update');
    r = await apt('install', '-y', 'chromium');
  }
  if (r.code !== 0) throw new Error(`apt-get install -y chromium failed (exit ${r.code}):\n${r.err.slice(-2000)}`);
  return Bun.which('chromium') ?? '/usr/bin/chromium';
}

/** Headless chromium as the tests run it: no sandbox (the tests run as root in CI), no GPU. */
export async function launchChromium(): Promise<Browser> {
  return puppeteer.launch({
    executablePath: await findChromium(),
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}

/**
 * A report's picture: `bun run bench report --png <result.json>` draws the HTML and then photographs
 * it, whole, in headless chromium, as `<run>.png` beside it (for a note, an issue or a review, where
 * an HTML file does not show). The browser is the tests' own (test/helpers/chromium.ts: Debian's
 * chromium, installed with apt-get when missing).
 */
import type { Browser } from 'puppeteer-core';
import { launchChromium } from '../../test/helpers/chromium';

/** The PNG path of a report: the same name, `.png` for `.html`. */
export const pngPath = (htmlPath: string) => htmlPath.replace(/\.html$/, '') + '.png';

/** Wide enough for the report's widest chart and table side by side with nothing wrapped. */
const VIEWPORT = { width: 1280, height: 900 };

/**
 * Photographs the report at `htmlPath` (a file the report fetches nothing for) into its PNG beside it;
 * returns the PNG's path. Uses `browser` when given, else starts one and closes it.
 */
export async function writePngBeside(htmlPath: string, browser?: Browser): Promise<string> {
  const own = browser ? undefined : await launchChromium();
  const page = await (browser ?? own)!.newPage();
  try {
    await page.setViewport(VIEWPORT);
    await page.goto(`file://${htmlPath}`, { waitUntil: 'load' });
    const path = pngPath(htmlPath);
    await page.screenshot({ path: path as `${string}.png`, fullPage: true });
    return path;
  } finally {
    await page.close();
    await own?.close();
  }
}

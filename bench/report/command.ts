/**
 * `bun run bench report [--png] <result.json> …`: draws each result's HTML report beside it
 * (bench/results/<run>.html), so runs from before the report get pictures too, and with `--png` a
 * screenshot of it (<run>.png, screenshot.ts). The bench itself calls writeHtmlBeside once it has
 * written a result (bench/lib/report.ts writeResults).
 */
import { resolve } from 'node:path';
import type { ResultData } from './model';
import { renderReport } from './page';
import { writePngBeside } from './screenshot';

/** The HTML path of a result file: the same name, `.html` for `.json`. */
export const htmlPath = (jsonPath: string) => jsonPath.replace(/\.json$/, '') + '.html';

export async function writeHtmlBeside(jsonPath: string, result: object): Promise<string> {
  const path = htmlPath(jsonPath);
  await Bun.write(path, renderReport(result as ResultData));
  return path;
}

/** Draws each file's report; exit code 1 when one could not be read or drawn (the others are still drawn). */
export async function reportCommand(args: readonly string[]): Promise<number> {
  const png = args.includes('--png');
  const files = args.filter((a) => a !== '--png');
  if (files.length === 0 || files.some((f) => f.startsWith('--'))) {
    console.error('usage: bun run bench report [--png] <result.json> [more.json …]');
    return 2;
  }
  let failed = 0;
  for (const file of files) {
    try {
      const result = (await Bun.file(file).json()) as object;
      const html = await writeHtmlBeside(resolve(file), result);
      console.log(html);
      if (png) console.log(await writePngBeside(html));
    } catch (e) {
      failed++;
      console.error(`${file}: ${e instanceof Error ? e.message : e}`);
    }
  }
  return failed ? 1 : 0;
}

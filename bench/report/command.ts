/**
 * `bun run bench report <result.json> …`: draws each result's HTML report beside it
 * (bench/results/<run>.html), so runs from before the report get pictures too. The bench itself
 * calls writeHtmlBeside once it has written a result (bench/lib/report.ts writeResults).
 */
import type { ResultData } from './model';
import { renderReport } from './page';

/** The HTML path of a result file: the same name, `.html` for `.json`. */
export const htmlPath = (jsonPath: string) => jsonPath.replace(/\.json$/, '') + '.html';

export async function writeHtmlBeside(jsonPath: string, result: object): Promise<string> {
  const path = htmlPath(jsonPath);
  await Bun.write(path, renderReport(result as ResultData));
  return path;
}

/** Draws each file's report; exit code 1 when one could not be read or drawn (the others are still drawn). */
export async function reportCommand(files: readonly string[]): Promise<number> {
  if (files.length === 0) {
    console.error('usage: bun run bench report <result.json> [more.json …]');
    return 2;
  }
  let failed = 0;
  for (const file of files) {
    try {
      const result = (await Bun.file(file).json()) as object;
      console.log(await writeHtmlBeside(file, result));
    } catch (e) {
      failed++;
      console.error(`${file}: ${e instanceof Error ? e.message : e}`);
    }
  }
  return failed ? 1 : 0;
}

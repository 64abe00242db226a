/**
 * The run's generated CSV files, kept in `$DATA_DIR/bench/files` between runs when the disk holds
 * them beside the run's data. When it does not hold them all (disk.ts decides: at 25M rows with
 * import B the four files are ~14 GB of a machine's 53-80), the run is lean: it keeps the smallest
 * files that still fit, and deletes each of the others as soon as a step has read it, so it takes no
 * space while the imports' data peaks, and generates it again (the same bytes: the generator is a
 * pure function of shape, rows and variant) before a later step reads it. A 25M file takes 30-65 s
 * to generate, outside every timed span but inside the run.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { generateCsv, type FileMeta } from './generate';

/** The generated files a run keeps between its steps: all, none (`--lean`), or the listed ones. */
export type Keep = 'all' | 'none' | ReadonlySet<string>;

export const keeps = (keep: Keep, path: string): boolean => keep === 'all' || (keep !== 'none' && keep.has(path));

export class RunFiles {
  private readonly generated: Set<string>;

  constructor(
    /** the files kept after their reads; each other generated file is deleted then (see above) */
    private readonly keep: Keep,
    /** the generated files (A, B); files made from them (gzip, clean) are always kept */
    files: FileMeta[],
    private readonly log: (m: string) => void,
  ) {
    this.generated = new Set(files.map((f) => f.path));
  }

  /** `file` on disk, generated again when a lean run deleted it. */
  async ready(file: FileMeta): Promise<void> {
    if (!this.generated.has(file.path) || existsSync(file.path)) return;
    const again = await generateCsv(file.path, file.rows, file.variant, this.log, file.shape);
    if (again.bytes !== file.bytes || again.normal !== file.normal)
      throw new Error(`${file.path} generated again differs: ${again.bytes} bytes, not ${file.bytes}`);
  }

  /** A step has read `file`: unless kept, it is deleted (and its meta, so nothing takes it as cached). */
  async read(file: FileMeta): Promise<void> {
    if (keeps(this.keep, file.path) || !this.generated.has(file.path)) return;
    await rm(file.path, { force: true });
    await rm(`${file.path}.meta.json`, { force: true });
    this.log(`[bench] ${file.path} deleted after its read (a lean run; generated again when needed)`);
  }
}

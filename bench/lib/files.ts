/**
 * The run's generated CSV files, kept in `$DATA_DIR/bench/files` between runs when the disk holds
 * them beside the run's data. When it does not (disk.ts decides: at 25M rows with import B the two
 * files are ~10 GB of a machine's ~80), the run is lean: each file is deleted as soon as a step has
 * read it, so no file takes space while the imports' data peaks, and generated again (the same
 * bytes: the generator is a pure function of shape, rows and variant) before a later step reads it. A 25M
 * file takes about a minute to generate, outside every timed span.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { generateCsv, type FileMeta } from './generate';

export class RunFiles {
  private readonly generated: Set<string>;

  constructor(
    /** delete each file after it is read (see above) */
    readonly lean: boolean,
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

  /** A step has read `file`: a lean run deletes it (and its meta, so nothing takes it as cached). */
  async read(file: FileMeta): Promise<void> {
    if (!this.lean || !this.generated.has(file.path)) return;
    await rm(file.path, { force: true });
    await rm(`${file.path}.meta.json`, { force: true });
    this.log(`[bench] ${file.path} deleted after its read (a lean run; generated again when needed)`);
  }
}

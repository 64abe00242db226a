/**
 * Writes the benchmark CSV for `rows` data rows of a shape and variant, streamed to disk in chunks
 * (memory stays flat whatever the size), and a `.meta.json` beside it with what the file holds. A
 * file whose meta matches (same shape, rows, variant and generator version) is reused instead of
 * written again.
 * Run alone: `bun bench/lib/generate.ts --rows 1000 --variant 0 --shape narrow --out /tmp/c.csv`.
 */
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { SHAPE_NAMES, SHAPES, type ShapeName } from './shapes';
import { Progress } from './format';

/** Bump when dataset.ts changes what it writes, so cached files are regenerated. */
const GENERATOR_VERSION = 6;
const CHUNK_ROWS = 20_000;

export interface FileMeta {
  version: number;
  path: string;
  /** absent in the metas of files cached before the narrow shape: those are wide */
  shape?: ShapeName;
  rows: number;
  variant: number;
  bytes: number;
  /** rows the service must treat as distinct good contacts (= addedCount on a fresh account) */
  normal: number;
  duplicates: number;
  malformed: number;
}

async function cached(path: string, rows: number, variant: number, shape: ShapeName): Promise<FileMeta | undefined> {
  const meta = (await Bun.file(`${path}.meta.json`)
    .json()
    .catch(() => undefined)) as FileMeta | undefined;
  if (
    !meta ||
    meta.version !== GENERATOR_VERSION ||
    (meta.shape ?? 'wide') !== shape ||
    meta.rows !== rows ||
    meta.variant !== variant ||
    !existsSync(path)
  )
    return undefined;
  return (await stat(path)).size === meta.bytes ? meta : undefined;
}

/** The file's meta when a run before left it as asked (said in the log), else undefined. */
async function reused(
  path: string,
  rows: number,
  variant: number,
  shape: ShapeName,
  log: (m: string) => void,
): Promise<FileMeta | undefined> {
  const reuse = await cached(path, rows, variant, shape);
  if (reuse) log(`[generate] reusing ${path} (${(reuse.bytes / 1e6).toFixed(1)} MB)`);
  return reuse;
}

export async function generateCsv(
  path: string,
  rows: number,
  variant: number,
  log = console.error,
  shape: ShapeName = 'wide',
): Promise<FileMeta> {
  const reuse = await reused(path, rows, variant, shape, log);
  if (reuse) return reuse;
  const tmp = `${path}.partial`;
  await mkdir(dirname(path), { recursive: true });
  await rm(tmp, { force: true });
  const writer = Bun.file(tmp).writer({ highWaterMark: 4 << 20 });
  const counts = { normal: 0, duplicates: 0, malformed: 0 };
  const { columns, rowAt, suffix } = SHAPES[shape];
  const progress = new Progress(`generate ${variant ? 'B' : 'A'}${suffix}`, rows, 'rows');
  const header = `${columns.join(',')}\n`;
  writer.write(header);
  let bytes = Buffer.byteLength(header);
  for (let start = 0; start < rows; start += CHUNK_ROWS) {
    const end = Math.min(rows, start + CHUNK_ROWS);
    const lines: string[] = [];
    for (let i = start; i < end; i++) {
      const row = rowAt(i, variant);
      if (row.kind === 'normal') counts.normal++;
      else if (row.kind === 'duplicate') counts.duplicates++;
      else counts.malformed++;
      lines.push(row.cells.join(','));
    }
    const text = `${lines.join('\n')}\n`;
    writer.write(text);
    bytes += Buffer.byteLength(text);
    await writer.flush();
    progress.update(end);
  }
  await writer.end();
  progress.done();
  const meta: FileMeta = { version: GENERATOR_VERSION, path, shape, rows, variant, bytes, ...counts };
  if ((await stat(tmp)).size !== bytes)
    throw new Error(`generator wrote ${(await stat(tmp)).size} bytes, expected ${bytes}`);
  await rename(tmp, path);
  await Bun.write(`${path}.meta.json`, JSON.stringify(meta, null, 2));
  return meta;
}

/**
 * generateCsv in a child process of its own (this file run alone), its progress on this process's
 * stderr: the generator is one core's work, so the bench makes a shape's files A and B at once, two
 * children on two cores (at 25M rows the run's four files took 3 minutes one after another).
 */
export async function generateInChild(
  path: string,
  rows: number,
  variant: number,
  log = console.error,
  shape: ShapeName = 'wide',
): Promise<FileMeta> {
  const reuse = await reused(path, rows, variant, shape, log);
  if (reuse) return reuse;
  const args = ['--out', path, '--rows', String(rows), '--variant', String(variant), '--shape', shape];
  const child = Bun.spawn([process.execPath, import.meta.path, ...args], { stdout: 'pipe', stderr: 'inherit' });
  const [out, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
  if (code !== 0) throw new Error(`generating ${path} exited with ${code}`);
  const meta = await cached(path, rows, variant, shape);
  if (!meta) throw new Error(`generating ${path} left no file matching its meta: ${out.trim()}`);
  return meta;
}

if (import.meta.main) {
  const arg = (name: string, fallback: string) => {
    const at = process.argv.indexOf(`--${name}`);
    return at > 0 ? (process.argv[at + 1] ?? fallback) : fallback;
  };
  const shape = arg('shape', 'wide') as ShapeName;
  if (!SHAPE_NAMES.includes(shape)) throw new Error(`--shape takes ${SHAPE_NAMES.join(', ')}`);
  const started = performance.now();
  const meta = await generateCsv(
    arg('out', '/tmp/bench-contacts.csv'),
    Number(arg('rows', '1000')),
    Number(arg('variant', '0')),
    console.error,
    shape,
  );
  const secs = (performance.now() - started) / 1000;
  console.log(
    JSON.stringify({
      ...meta,
      seconds: Number(secs.toFixed(2)),
      bytesPerRow: Number((meta.bytes / meta.rows).toFixed(1)),
    }),
  );
}

/**
 * Step `gzip` (an extension beyond the contract): file A gzip-compressed, imported through the real
 * flow into a fresh account exactly like import A, and verified to the same end state. The worker
 * gunzips the object while it reads it (worker/import/decompress.ts). The compressed file is made
 * once, streamed (level 6, as `gzip` does by default), and cached beside file A with a meta file.
 */
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import type { Sql } from '../../src/db';
import { createBenchAccount } from '../lib/account';
import type { FileMeta } from '../lib/generate';
import { runImportFlow, type ImportOptions, type ImportRun } from '../lib/import-flow';
import { Progress } from '../lib/format';
import { checkImport } from '../lib/verify';

const LEVEL = 6;

export interface GzipMeta {
  path: string;
  /** compressed size */
  bytes: number;
  level: number;
  /** the plain file it was made from, as its meta said */
  source: { path: string; bytes: number; rows: number; variant: number; version: number };
  /** how long compressing took when the file was made (it is reused after) */
  compressSeconds: number;
}

export interface GzipRun extends ImportRun {
  file: GzipMeta;
  accountId: string;
}

/** `<file A>.gz`, made when missing or made from another file A. */
export async function gzipFile(plain: FileMeta, log: (m: string) => void): Promise<GzipMeta> {
  const path = `${plain.path}.gz`;
  const source = {
    path: plain.path,
    bytes: plain.bytes,
    rows: plain.rows,
    variant: plain.variant,
    version: plain.version,
  };
  const meta = (await Bun.file(`${path}.meta.json`)
    .json()
    .catch(() => undefined)) as GzipMeta | undefined;
  if (
    meta &&
    meta.level === LEVEL &&
    JSON.stringify(meta.source) === JSON.stringify(source) &&
    existsSync(path) &&
    (await stat(path)).size === meta.bytes
  ) {
    log(`[gzip] reusing ${path} (${(meta.bytes / 1e6).toFixed(1)} MB)`);
    return meta;
  }
  const tmp = `${path}.partial`;
  await rm(tmp, { force: true });
  const progress = new Progress('gzip file A', Math.round(plain.bytes / 1e6), 'MB');
  let read = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      read += chunk.length;
      progress.update(Math.round(read / 1e6));
      done(null, chunk);
    },
  });
  const started = performance.now();
  await pipeline(
    createReadStream(plain.path, { highWaterMark: 1 << 20 }),
    counter,
    createGzip({ level: LEVEL, chunkSize: 256 * 1024 }),
    createWriteStream(tmp),
  );
  const made: GzipMeta = {
    path,
    bytes: (await stat(tmp)).size,
    level: LEVEL,
    source,
    compressSeconds: (performance.now() - started) / 1000,
  };
  progress.done();
  await rename(tmp, path);
  await Bun.write(`${path}.meta.json`, JSON.stringify(made, null, 2));
  return made;
}

/**
 * Import A again from the compressed file, into a fresh account; verified like import A (counts
 * from the generator, the account's contact total, sampled contacts read back through the API).
 */
export async function runGzipImport(
  ctx: { baseUrl: string; sql: Sql; workerPid: number },
  runId: string,
  plain: FileMeta,
  gz: GzipMeta,
  opts: ImportOptions & { samples: number },
  log: (m: string) => void,
): Promise<GzipRun> {
  const account = await createBenchAccount(ctx.sql, `${runId} gzip`);
  // The compressed file is what is uploaded: its path and size; the rows and counts are file A's.
  const upload: FileMeta = { ...plain, path: gz.path, bytes: gz.bytes };
  const run = await runImportFlow(ctx, account, upload, 'import A gzip', opts);
  const check = { label: 'import A gzip', mode: 'added' as const, variants: [0], samples: opts.samples };
  await checkImport(ctx, account, plain, run.view, check);
  log(`[bench] import A gzip verified: ${JSON.stringify(run.view)}`);
  return { ...run, file: gz, accountId: account.id };
}

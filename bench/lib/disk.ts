/**
 * Disk space a run will need in the data directory, checked before anything is generated or
 * imported: a 25M-row run that runs out of space fails half an hour in, with PostgreSQL's "No space
 * left on device" in a log file, and may leave the cluster needing recovery.
 *
 * The estimate is the peak, measured on full runs (25M rows, 4.7 GB file, contacts at
 * fillfactor 60). With import B it comes where B's dedupe hands over to its merge: A's contacts
 * (4.8 × the file), B's uploaded object (1 ×), its staged rows (2.5 ×) and its merge table (2.7 ×)
 * are all on disk at once, beside the WAL (at most about max_wal_size, 8 GB, between checkpoints).
 * Sampled every 10 s through a run of all default steps (bench/findings/2026-11-27-default-run-25m.md):
 * 57.5 GB besides 8.6 GB of WAL, 11.5 × file B, so 12 ×. Later in B's merge the staged rows are gone
 * and A's contacts grow to 6.6 × with the new versions of B's updates that find no room on their
 * page: 6.6 + 1 + 2.7 and the plan tables stay below that. (Before the plan tables' VACUUM,
 * bench/findings/2026-11-27-plan-tables-vacuum.md, they grew with every batch, and B's peak came late
 * in its merge at ~75 GB besides the WAL, 15 ×: a run of `--steps l1,a,b,http` ran out of space there
 * with B's merge at 89 %, bench/findings/2026-11-26-disk-check-import-b.md.)
 * Import A alone peaks at its own dedupe: object + staged rows + merge table + sort ≈ 7.5 × + WAL.
 * A second import of file A into another account while A's contacts stay (the gzip, report, fair
 * steps after A) adds contacts instead of new versions of A's: it peaks at the end of its
 * merge with A's contacts, its object, its merge table and its own contacts (4.8 + 1 + 2.7 + 4.8 ×),
 * 13 × + WAL; after import B, A's contacts are 6.6 × already: 15 × + WAL.
 *
 * The dba step runs in a database of its own, dropped after it (bench/steps/dba.ts), so it adds nothing
 * to the imports' peak; its own peak (its contacts after file B's upserts, the COPY's table of B, the
 * WAL) is below import B's, which has B's object and merge table besides, and below import A's
 * without B. The pgloader step (bench/steps/pgloader.ts) writes the same tables the same way, in a
 * database of its own too.
 * The mixed step drops the run's contacts before its import of file A into another account
 * (bench/index.ts), which then peaks like import A alone: it adds nothing either. (When it did not,
 * its import added a third set of contacts beside A's and B's: 5 × more, 108 GB for the default steps.)
 *
 * The narrow shape's steps run before the wide shape's and drop their contacts before them, and
 * every shape's 1M runs (the flatness check) run before its own imports and drop theirs
 * (bench/steps/shape-steps.ts): each is a part of the run with a peak of its own (DiskPart), not added to
 * the wide import B's. A narrow row is 40 % of a wide row's bytes but not of its contact, staged
 * row and merge row (their fixed parts weigh more), so its peaks are more of its own files: at
 * 200,000 rows, sampled every 0.3 s (base directory and uploaded objects), narrow A peaked at
 * 11.9 × its file and B at 19.2 × file B, where the wide shape peaked at 7.6 × and 13.8 × at the same
 * size (7.5 × and 11.5 × at 25M): 12 × and 20 ×. At 25M rows that is ~40 GB with the WAL for the
 * narrow import B, below the wide one's ~68 GB, so the default run's peak stays the wide one's.
 *
 * The generated files take space too. When the data directory cannot hold them all beside that
 * peak, the run is lean (files.ts): it keeps the smallest files that still fit (keptFiles), and
 * deletes each other one after a step has read it and generates it again before the next step that
 * reads it, so at the peak only the kept files are on disk, and the others already there count as
 * space the run gets back. (Lean used to keep none: at 25M rows with 75 GB free, 77 needed with all
 * kept, it generated the 25M files again seven times, about 6 minutes of the run, where the 1M
 * and narrow ones fitted.)
 */
import { existsSync } from 'node:fs';
import { readdir, stat, statfs } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { keeps, type Keep } from './files';
import type { ShapeName } from './shapes';

/**
 * Bytes per row of the generated files: wide A 188, B 198; narrow A 74, B 79 (at 1M rows; an
 * email is a character longer at 25M).
 */
export const FILE_BYTES_PER_ROW: Record<ShapeName, number> = { wide: 200, narrow: 80 };
/** WAL kept between checkpoints: the embedded cluster's max_wal_size (src/embedded/postgres.ts). */
const WAL_BYTES = 8e9;
/** WAL bytes one imported row writes (contact heap tuple + primary key entry, measured 660). */
const WAL_BYTES_PER_ROW = 700;
/** The peak with import B, in files (see above). */
const IMPORT_B_FILES = 12;
/** The peak with a second import of file A into another account after A, in files (see above). */
const SECOND_IMPORT_FILES = 13;
/** The same second import after import B, over A's contacts grown by B's updates (see above). */
const SECOND_IMPORT_AFTER_B_FILES = 15;
/** The peak with import A alone, in files (see above). */
const IMPORT_A_FILES = 7.5;
/** The narrow shape's peaks in its own files, import A alone and with B (see above). */
const NARROW_FILES = { a: 12, b: 20 };

/**
 * A part of the run that starts from an empty contacts table and leaves it so: the narrow shape's
 * steps (its contacts dropped before the wide shape's imports), the 1M runs of the flatness check.
 * Its peak is its own, beside the run's main one, not on top of it.
 */
export interface DiskPart {
  shape: ShapeName;
  rows: number;
  /** its generated files */
  files: string[];
  importA: boolean;
  importB: boolean;
}

export interface DiskPlan {
  dataDir: string;
  /** the wide shape's part, the run's main one (the steps after the imports read its file A) */
  rows: number;
  /** the wide shape's generated files the run reads (files.ts), generated first when missing */
  files: string[];
  /** files made from them that the run keeps whatever the disk (the report step's clean file) */
  derived?: string[];
  importA: boolean;
  /** import B: file B over A's contacts (or the dba step's B statement) */
  importB: boolean;
  /** another import of file A into another account while A's contacts stay */
  secondImport?: boolean;
  /** the other parts, each peaking alone (see DiskPart) */
  others?: DiskPart[];
  /** the WAL kept between checkpoints, when not one embedded PostgreSQL's (a cluster's nodes each keep theirs) */
  walBytes?: number;
  /**
   * WAL segments already in the embedded server's pg_wal (walOnDisk): an earlier run's, which the
   * server recycles rather than adds to, so they count against the WAL the run needs.
   */
  walOnDisk?: number;
}

/** The generated files of the plan, with their estimated bytes. */
function planFiles(plan: DiskPlan): { path: string; bytes: number }[] {
  const file = plan.rows * FILE_BYTES_PER_ROW.wide;
  return [
    ...plan.files.map((path) => ({ path, bytes: file })),
    ...(plan.others ?? []).flatMap((p) =>
      p.files.map((path) => ({ path, bytes: p.rows * FILE_BYTES_PER_ROW[p.shape] })),
    ),
  ];
}

/**
 * The bytes the run needs free in `dataDir` at its peak (0 when it imports nothing) when it keeps
 * `keep` of its generated files: the kept files still to generate, and the peak less the other
 * files already on disk, which the run deletes before it. With no peak, the kept files to generate
 * and the largest other one, generated and deleted one at a time; with one, at least the kept files
 * and the largest other one, generated again beside them.
 */
export function neededBytes(plan: DiskPlan, keep: Keep = 'all'): number {
  const file = plan.rows * FILE_BYTES_PER_ROW.wide;
  const others = plan.others ?? [];
  const files = planFiles(plan);
  const sum = (list: { bytes: number }[]) => list.reduce((s, f) => s + f.bytes, 0);
  const largest = (list: { bytes: number }[]) => Math.max(0, ...list.map((f) => f.bytes));
  const kept = files.filter((f) => keeps(keep, f.path));
  const deleted = files.filter((f) => !keeps(keep, f.path));
  const keptToMake = sum(kept.filter((f) => !existsSync(f.path)));
  const derived = (plan.derived ?? []).filter((f) => !existsSync(f)).length * file;
  const rows = Math.max(plan.rows, ...others.map((p) => p.rows));
  const wal = Math.max(0, Math.min(plan.walBytes ?? WAL_BYTES, rows * WAL_BYTES_PER_ROW) - (plan.walOnDisk ?? 0));
  const peak = Math.max(peakFiles(plan) * file, ...others.map(partPeak));
  if (peak === 0) return derived + keptToMake + largest(deleted.filter((f) => !existsSync(f.path)));
  const deletedOnDisk = sum(deleted.filter((f) => existsSync(f.path)));
  return Math.max(keptToMake + largest(deleted), derived + peak + wal + keptToMake - deletedOnDisk);
}

/**
 * The files a run keeps when not all fit (see above): the smallest first, each kept while the run
 * still fits in `free` bytes with it. A smaller file holds fewer bytes per regeneration saved, and
 * the narrow shape's file A, the smallest at the run's rows, is read by the most steps (L1, dba,
 * import A, the mixed step).
 */
export function keptFiles(plan: DiskPlan, free: number): Set<string> {
  const keep = new Set<string>();
  for (const f of planFiles(plan).sort((x, y) => x.bytes - y.bytes)) {
    keep.add(f.path);
    if (neededBytes(plan, keep) > free) keep.delete(f.path);
  }
  return keep;
}

/** The main part's peak in files (see above); 0 when nothing is imported. */
function peakFiles(plan: DiskPlan): number {
  if (plan.importB && plan.secondImport) return SECOND_IMPORT_AFTER_B_FILES;
  if (plan.importB) return IMPORT_B_FILES;
  if (plan.secondImport) return SECOND_IMPORT_FILES;
  return plan.importA ? IMPORT_A_FILES : 0;
}

/** Another part's peak in bytes: its imports' in its own files. */
function partPeak(p: DiskPart): number {
  const files = p.shape === 'wide' ? { a: IMPORT_A_FILES, b: IMPORT_B_FILES } : NARROW_FILES;
  return (p.importB ? files.b : p.importA ? files.a : 0) * p.rows * FILE_BYTES_PER_ROW[p.shape];
}

/**
 * Which generated files the run keeps (`keep`; `lean` when not all of them: the others are deleted
 * after their reads) with `--lean` none; throws with what to do when even keeping none cannot fit.
 */
export async function checkDiskSpace(
  plan: DiskPlan,
  log: (m: string) => void,
  opts: { lean?: boolean } = {},
): Promise<{ lean: boolean; keep: Keep }> {
  const all = neededBytes(plan);
  const none = neededBytes(plan, 'none');
  const fs = await statfs(plan.dataDir);
  const free = fs.bavail * fs.bsize;
  const gb = (n: number) => `${(n / 1e9).toFixed(1)} GB`;
  const needs = `the run needs about ${gb(all)} free in ${plan.dataDir} at its peak`;
  if (!opts.lean && free >= all) {
    log(`[bench] disk: ${needs}; ${gb(free)} are free`);
    return { lean: false, keep: 'all' };
  }
  if (free >= none) {
    const keep = opts.lean ? 'none' : keptFiles(plan, free);
    const names = keep === 'none' ? [] : [...keep].map((p) => basename(p));
    const what = names.length
      ? `keeping ${names.join(', ')} (${gb(neededBytes(plan, keep))}) and deleting the others after their reads`
      : `deleting each after its read${opts.lean ? ' (--lean)' : ''}`;
    log(
      `[bench] disk: ${needs} with its generated files kept, ${gb(none)} with none kept; ${gb(free)} are free: ${what}`,
    );
    return { lean: true, keep };
  }
  throw new Error(
    `not enough disk space in ${plan.dataDir}: this run needs about ${gb(none)} at its peak (staged rows, the ` +
      `dedupe sort, contacts, WAL; ${gb(all)} with the generated files kept) and ${gb(free)} are free. ` +
      'Free some space, or run fewer rows (--rows N).',
  );
}

/**
 * Bytes of WAL segments in the embedded single node's pg_wal under `dataDir` (0 when there is none):
 * after a big run it holds up to max_wal_size of recycled segments, which the next run reuses.
 */
export async function walOnDisk(dataDir: string): Promise<number> {
  const dir = join(dataDir, 'postgres', 'pg_wal');
  const names = await readdir(dir).catch(() => [] as string[]);
  const sizes = await Promise.all(
    names
      .filter((n) => /^[0-9A-F]{24}$/.test(n))
      .map((n) =>
        stat(join(dir, n)).then(
          (s) => s.size,
          () => 0,
        ),
      ),
  );
  return sizes.reduce((a, b) => a + b, 0);
}

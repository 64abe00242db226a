/**
 * What a run reads, decided from its flags before anything runs: each shape's files for L1, the
 * dba step and the imports (and its small files for the flatness check), the wide file A the other
 * steps read, and what those give bench/lib/disk.ts to estimate.
 */
import { join } from 'node:path';
import type { DiskPart, DiskPlan } from './disk';
import { cleanPath } from '../steps/report-cost';
import { RUN_ORDER, SHAPES, type ShapeName } from './shapes';

export interface PlanOptions {
  rows: number;
  steps: readonly string[];
  shapes: readonly ShapeName[];
  /** rows of the flatness check's small files (flat.ts), when the run has more; 0: no check */
  flatRows: number;
  citusWorkers: number;
  /** the shape of the file the mixed step imports (bench/index.ts says why narrow by default) */
  mixedShape: ShapeName;
}

export interface FilePaths {
  a: string;
  b?: string;
}

export interface ShapePaths extends FilePaths {
  shape: ShapeName;
  /** the small files of the flatness check */
  flat?: FilePaths;
}

/** The per-shape steps' files, in RUN_ORDER (none when none of l1, dba, pgloader, a runs). */
export function shapePaths(opts: PlanOptions, dir: string): ShapePaths[] {
  const has = (s: string) => opts.steps.includes(s);
  if (!has('l1') && !has('dba') && !has('pgloader') && !has('a')) return [];
  const flat = opts.flatRows > 0 && opts.rows > opts.flatRows && (has('dba') || has('a'));
  return RUN_ORDER.filter((s) => opts.shapes.includes(s)).map((shape) => {
    const pair = (rows: number): FilePaths => ({
      a: join(dir, SHAPES[shape].fileName(rows, 0)),
      b: has('b') ? join(dir, SHAPES[shape].fileName(rows, 1)) : undefined,
    });
    return { shape, ...pair(opts.rows), flat: flat ? pair(opts.flatRows) : undefined };
  });
}

/**
 * The narrow file A, which the events step reads whatever `--shapes` says (bench/steps/events.ts says
 * why), and the mixed step by default.
 */
export const narrowAPath = (opts: PlanOptions, dir: string): string => join(dir, SHAPES.narrow.fileName(opts.rows, 0));

/** Whether the mixed step runs on the narrow file A (the default) rather than the wide one. */
const mixedOnNarrow = (opts: PlanOptions) => opts.steps.includes('mixed') && opts.mixedShape === 'narrow';

/** Whether a step after the shapes' imports reads the narrow file A: the events step, the mixed step on it. */
export const otherStepsReadNarrowA = (opts: PlanOptions): boolean =>
  opts.steps.includes('events') || mixedOnNarrow(opts);

/** The steps that read the wide file A whatever `--shapes` says (the cluster's side too). */
export function otherStepsReadWideA(opts: PlanOptions): boolean {
  const has = (s: string) => opts.steps.includes(s);
  const mixed = has('mixed') && opts.mixedShape === 'wide';
  return has('profile') || has('gzip') || has('report') || has('fair') || mixed || opts.citusWorkers > 0;
}

/**
 * The disk plan of the run: the wide shape's part at the run's rows (with the steps after it), and
 * as parts of their own the narrow shape's steps and every shape's small runs (shape-steps.ts: each
 * starts from an empty contacts table and drops its contacts after), and the imports of the narrow
 * file A by the events step and by default the mixed step (`narrowA`; after the run's contacts were
 * dropped, each import's dropped after it).
 */
export function diskPlan(
  opts: PlanOptions,
  shapes: ShapePaths[],
  wideA: string | undefined,
  dataDir: string,
  walOnDisk: number,
  narrowA?: string,
): DiskPlan {
  const has = (s: string) => opts.steps.includes(s);
  const wide = shapes.find((s) => s.shape === 'wide');
  const ab = (p: FilePaths) => [p.a, ...(p.b ? [p.b] : [])];
  const files = wide ? ab(wide) : wideA ? [wideA] : [];
  // The dba and pgloader steps write import A's contacts (and B's over them) in a database of their own.
  const peer = has('dba') || has('pgloader');
  const wideImportA = !!wide && (has('a') || peer);
  // gzip, report or fair after A: A's contacts stay while a second import of A, into another
  // account, peaks (the report step deletes each of its runs' contacts before the next). The mixed
  // step drops them first: its import peaks like import A alone, of its own shape's file.
  const secondImport = !!wide && has('a') && (has('gzip') || has('report') || has('fair'));
  const mixedWide = has('mixed') && !mixedOnNarrow(opts);
  const importA = wideImportA || has('gzip') || has('report') || has('fair') || mixedWide;
  // Import B, and the dba step's statement for file B, load B over A's contacts.
  const importB = !!wide && has('b');
  const part = (shape: ShapeName, rows: number, p: FilePaths): DiskPart => ({
    shape,
    rows,
    files: ab(p),
    importA: has('a') || peer,
    importB: has('b'),
  });
  const others = shapes.flatMap((s) => [
    ...(s.shape === 'wide' ? [] : [part(s.shape, opts.rows, s)]),
    ...(s.flat ? [part(s.shape, opts.flatRows, s.flat)] : []),
  ]);
  if (otherStepsReadNarrowA(opts)) {
    // One narrow import A at a time: its peak (the narrow shape's part, when planned, holds the file).
    const planned = shapes.some((s) => s.shape === 'narrow');
    const files = planned || !narrowA ? [] : [narrowA];
    others.push({ shape: 'narrow', rows: opts.rows, files, importA: true, importB: false });
  }
  const derived = has('report') && files[0] ? [cleanPath(files[0])] : [];
  return { dataDir, rows: opts.rows, files, derived, importA, importB, secondImport, others, walOnDisk };
}

/**
 * The steps that run once per file shape (`--shapes`, bench/lib/shapes.ts): L1 (the COPY of the shape's
 * file A), the dba step and the pgloader step (each on its files A and B), then import A and import B
 * into an account of the shape, each verified. When the run has more than 1M rows (`--flat-rows`), the dba step and the
 * imports also run on the shape's 1M files (the first 1,000,000 rows of the same generator) just
 * before the run's own, their contacts dropped after: seconds per 1M rows at both sizes in one run
 * (flat.ts). The pgloader step then runs on those small files only: at ~11k rows/s it would add
 * about 2.5 hours to a 25M run (bench/findings/2026-12-06-pgloader-peer-1m.md), so the imports'
 * × pgloader comes from the 1M pairs (the 1M imports over pgloader's 1M loads).
 *
 * The narrow shape runs first and its contacts are dropped before the wide shape's imports: its
 * peak is then its own, not added to the wide import B's, the run's highest (bench/lib/disk.ts).
 */
import { createBenchAccount, dropAccountContacts, type BenchAccount } from '../lib/account';
import { runDba, type DbaRun } from './dba';
import { runPgloader, type PgloaderRun } from './pgloader';
import type { RunFiles } from '../lib/files';
import type { FileMeta } from '../lib/generate';
import type { ImportOptions, ImportRun } from '../lib/import-flow';
import { runL1, type L1Result } from './l1';
import type { LoadRow } from '../lib/types';
import type { Infra } from '../lib/services';
import { SHAPES, type ShapeName } from '../lib/shapes';
import { Progress, sizeLabel } from '../lib/format';
import { importA, importB, type StepContext } from './import-and-http';
import { stepStarts } from '../lib/run-clock';

/** Issue 15's targets against L1, kept for the wide shape they were set on. */
const TARGET_X_L1 = { a: 8, b: 11 } as const;
/** Import A and B against the dba step's statement for the same file, for every shape. */
export const TARGET_X_DBA = { a: 0.5, b: 0.6 } as const;

export interface ShapeFiles {
  a: FileMeta;
  b?: FileMeta;
}

/** The dba step and the imports of one shape on its small files (1M rows unless `--flat-rows`). */
export interface FlatRun {
  files: ShapeFiles;
  dba?: DbaRun;
  /** the pgloader step on the small files, in place of the run's own (see above) */
  pgloader?: PgloaderRun;
  importA?: ImportRun;
  importB?: ImportRun;
}

export interface ShapeRun {
  shape: ShapeName;
  files: ShapeFiles;
  l1?: L1Result;
  dba?: DbaRun;
  /** the peer tool: the dba step's upsert as pgloader's after-load SQL (on the small files instead, when there are) */
  pgloader?: PgloaderRun;
  importA?: ImportRun;
  importB?: ImportRun;
  /** the account of the imports (its contacts dropped after them, but for the wide shape's) */
  accountId?: string;
  /** the same steps on the small files, when the run has more rows */
  flat?: FlatRun;
}

/**
 * A peer step's rows done, for the run's progress line: each file's rows once its upsert has
 * committed, over every file the step loads. The dba and pgloader steps run a statement (or a
 * process) per file that reports nothing while it runs: a 25M dba step's line said
 * `-/52,000,000 rows` for 20-35 minutes.
 */
export function filesProgress(label: string, files: readonly (FileMeta | undefined)[]): (rows: number) => void {
  const total = files.reduce((sum, f) => sum + (f?.rows ?? 0), 0);
  const progress = new Progress(label, total, 'rows');
  let done = 0;
  return (rows) => progress.update((done += rows));
}

/**
 * L1, the dba step and the pgloader step of one shape, before the service starts (as the bench always
 * ran them, so the peers' figures owe nothing to an idle API and worker); the dba step on the small
 * files first.
 */
export async function copySteps(
  infra: Infra,
  runId: string,
  run: ShapeRun,
  steps: { l1: boolean; dba: boolean; pgloader: boolean },
  runFiles: RunFiles,
  log: (m: string) => void,
): Promise<void> {
  const suffix = SHAPES[run.shape].suffix;
  if (steps.l1) {
    stepStarts('l1', run.shape);
    await runFiles.ready(run.files.a);
    run.l1 = await runL1(infra.sql, run.files.a);
    await runFiles.read(run.files.a);
  }
  if (steps.dba) {
    stepStarts('dba', run.shape);
    const { flat, files } = run;
    const onFile = filesProgress(`dba${suffix}`, [flat?.files.a, flat?.files.b, files.a, files.b]);
    if (flat)
      flat.dba = await runDba(infra, `${runId} ${sizeLabel(flat.files.a.rows)}`, flat.files, runFiles, log, onFile);
    run.dba = await runDba(infra, runId, files, runFiles, log, onFile);
  }
  if (!steps.pgloader) return;
  stepStarts('pgloader', run.shape);
  // On the small files when the run has them (see the top of this file), else on the run's.
  const files = run.flat?.files ?? run.files;
  const onFile = filesProgress(`pgloader${suffix}`, [files.a, files.b]);
  const id = run.flat ? `${runId} ${sizeLabel(files.a.rows)}` : runId;
  const pgloader = await runPgloader(infra, id, files, runFiles, log, onFile);
  if (run.flat) run.flat.pgloader = pgloader;
  else run.pgloader = pgloader;
}

/**
 * Import A, then B over it, of one shape with the service up: on the small files first, into an
 * account of their own whose contacts are dropped after, then the run's files into `account`.
 * The wide shape's contacts stay (the HTTP step reads them; gzip, report and fair import beside
 * them); any other shape's are dropped after its imports.
 */
export async function importSteps(
  ctx: StepContext,
  run: ShapeRun,
  account: BenchAccount,
  steps: { a: boolean; b: boolean },
  opts: Omit<ImportOptions, 'strategy'> & { samples: number },
  runId: string,
  log: (m: string) => void,
  /** called after the run's import A, before B (the cluster side compares the contacts' bytes then) */
  afterImportA?: () => Promise<void>,
  /** called after the run's import B, before a narrow shape's contacts are dropped (the search step) */
  afterImportB?: () => Promise<void>,
): Promise<void> {
  const shape = SHAPES[run.shape];
  if (run.flat && steps.a) {
    stepStarts('flat imports', run.shape);
    const size = sizeLabel(run.flat.files.a.rows);
    const small = await createBenchAccount(ctx.sql, `${runId} ${size}${shape.suffix}`, shape);
    const label = { importA: shape.label('import A', size), importB: shape.label('import B', size) };
    run.flat.importA = await importA(ctx, small, run.flat.files.a, { ...opts, label: label.importA }, log);
    if (steps.b && run.flat.files.b)
      run.flat.importB = await importB(ctx, small, run.flat.files.b, { ...opts, label: label.importB }, log);
    log(`[bench] the ${size} imports' contacts${shape.suffix} ${await dropAccountContacts(ctx.sql, small.id)}`);
  }
  run.accountId = account.id;
  if (steps.a) stepStarts('import A', run.shape);
  if (steps.a) run.importA = await importA(ctx, account, run.files.a, opts, log);
  if (steps.a) await afterImportA?.();
  if (steps.b && run.files.b) stepStarts('import B', run.shape);
  if (steps.b && run.files.b) run.importB = await importB(ctx, account, run.files.b, opts, log);
  if (run.importB) await afterImportB?.();
  if (run.shape !== 'wide' && steps.a)
    log(`[bench] the contacts of import A and B${shape.suffix} ${await dropAccountContacts(ctx.sql, account.id)}`);
}

/**
 * The shape's rows of the load table: L1, the dba step's files, pgloader's (against L1 and dba), the
 * imports against all three.
 */
export function loadRows(run: ShapeRun): LoadRow[] {
  const shape = SHAPES[run.shape];
  const { l1, dba, pgloader } = run;
  const rows: LoadRow[] = [];
  const toL1 = (seconds: number) => (l1 ? seconds / l1.seconds : undefined);
  if (l1) rows.push({ step: shape.label('L1 COPY', 'baseline'), seconds: l1.seconds, rows: l1.rows, bytes: l1.bytes });
  for (const key of ['a', 'b'] as const) {
    const d = dba?.[key];
    const file = run.files[key];
    if (d && file)
      rows.push({
        step: shape.label(`dba ${key.toUpperCase()}`, 'COPY + upsert'),
        seconds: d.seconds,
        rows: file.rows,
        bytes: file.bytes,
        ratioToL1: toL1(d.seconds),
      });
  }
  // On the small files when the run has some: beside their own dba step, no L1 of their size.
  const flat = run.flat?.pgloader && run.flat;
  for (const key of ['a', 'b'] as const) {
    const p = (flat ? flat.pgloader : pgloader)?.[key];
    const file = (flat ? flat.files : run.files)[key];
    const d = (flat ? flat.dba : dba)?.[key];
    if (p && file)
      rows.push({
        step: shape.label(`pgloader ${key.toUpperCase()}`, `${flat ? `${sizeLabel(file.rows)}, ` : ''}load + upsert`),
        seconds: p.seconds,
        rows: file.rows,
        bytes: file.bytes,
        ratioToL1: flat ? undefined : toL1(p.seconds),
        ratioToDba: d ? p.seconds / d.seconds : undefined,
      });
  }
  for (const key of ['a', 'b'] as const) {
    const imported = key === 'a' ? run.importA : run.importB;
    const file = run.files[key];
    const d = dba?.[key];
    const p = pgloader?.[key];
    // × pgloader from the 1M pair: the 1M import over pgloader's load of the same 1M file.
    const small = flat && (key === 'a' ? flat.importA : flat.importB);
    const flatP = flat && flat.pgloader?.[key];
    if (imported && file)
      rows.push({
        step: shape.label(`import ${key.toUpperCase()}`),
        seconds: imported.seconds,
        rows: file.rows,
        bytes: file.bytes,
        ratioToL1: toL1(imported.seconds),
        target: run.shape === 'wide' ? TARGET_X_L1[key] : undefined,
        ratioToDba: d ? imported.seconds / d.seconds : undefined,
        dbaTarget: d ? TARGET_X_DBA[key] : undefined,
        ratioToPgloader: p ? imported.seconds / p.seconds : small && flatP ? small.seconds / flatP.seconds : undefined,
        workerPeakRssMb: imported.workerPeakRssMb,
      });
  }
  return rows;
}

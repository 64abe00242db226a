/**
 * The steps that run once per file shape (`--shapes`, bench/shapes.ts): L1 (the COPY of the shape's
 * file A), the dba step (its files A and B), then import A and import B into an account of the
 * shape, each verified.
 *
 * The narrow shape runs first and its contacts are dropped before the wide shape's imports: its
 * peak is then its own, not added to the wide import B's, the run's highest (bench/disk.ts).
 */
import { dropAccountContacts, type BenchAccount } from './account';
import { runDba, type DbaRun } from './dba';
import type { RunFiles } from './files';
import type { FileMeta } from './generate';
import type { ImportOptions, ImportRun } from './import-flow';
import { runL1, type L1Result } from './l1';
import type { LoadRow } from './report';
import type { Infra } from './services';
import { SHAPES, type ShapeName } from './shapes';
import { importA, importB, type StepContext } from './steps';

/** Narrow first: see above. */
export const RUN_ORDER: readonly ShapeName[] = ['narrow', 'wide'];
/** Issue 15's targets against L1, kept for the wide shape they were set on. */
const TARGET_X_L1 = { a: 8, b: 11 } as const;
/** Import A and B against the dba step's statement for the same file, for every shape. */
export const TARGET_X_DBA = { a: 0.5, b: 0.6 } as const;

export interface ShapeFiles {
  a: FileMeta;
  b?: FileMeta;
}

export interface ShapeRun {
  shape: ShapeName;
  files: ShapeFiles;
  l1?: L1Result;
  dba?: DbaRun;
  importA?: ImportRun;
  importB?: ImportRun;
  /** the account of the imports (its contacts dropped after them, but for the wide shape's) */
  accountId?: string;
}

/**
 * L1 and the dba step of one shape, before the service starts (as the bench always ran them, so
 * the peer's figures owe nothing to an idle API and worker).
 */
export async function copySteps(
  infra: Infra,
  runId: string,
  run: ShapeRun,
  steps: { l1: boolean; dba: boolean },
  runFiles: RunFiles,
  log: (m: string) => void,
): Promise<void> {
  if (steps.l1) {
    await runFiles.ready(run.files.a);
    run.l1 = await runL1(infra.sql, run.files.a);
    await runFiles.read(run.files.a);
  }
  if (!steps.dba) return;
  run.dba = await runDba(infra, runId, run.files, runFiles, log);
}

/**
 * Import A, then B over it, of one shape with the service up, into `account`. The wide shape's
 * contacts stay (the HTTP step reads them; gzip, report and fair import beside them); any other
 * shape's are dropped after its imports.
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
): Promise<void> {
  const shape = SHAPES[run.shape];
  run.accountId = account.id;
  if (steps.a) run.importA = await importA(ctx, account, run.files.a, opts, log);
  if (steps.a) await afterImportA?.();
  if (steps.b && run.files.b) run.importB = await importB(ctx, account, run.files.b, opts, log);
  if (run.shape !== 'wide' && steps.a)
    log(`[bench] the contacts of import A and B${shape.suffix} ${await dropAccountContacts(ctx.sql, account.id)}`);
}

/** The shape's rows of the load table: L1, the dba step's files, the imports against both. */
export function loadRows(run: ShapeRun): LoadRow[] {
  const shape = SHAPES[run.shape];
  const { l1, dba } = run;
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
  for (const key of ['a', 'b'] as const) {
    const imported = key === 'a' ? run.importA : run.importB;
    const file = run.files[key];
    const d = dba?.[key];
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
        workerPeakRssMb: imported.workerPeakRssMb,
      });
  }
  return rows;
}

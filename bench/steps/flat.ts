/**
 * Flat cost in one run (issue: "at 1M and 25M rows in the same run; seconds per 1M rows at 25M
 * within 10 % of the same run's 1M figures"): when the run has more than 1M rows, each shape's dba
 * step, import A and import B also run on its 1M files (shape-steps.ts), and this sets seconds per
 * 1M rows at both sizes side by side. The imports carry the target; the dba step's rows say whether
 * PostgreSQL's own cost per row moved on the same machine in the same run. `--flat-rows N` sets
 * the small files' rows (a quick run checks the step with fewer), `--no-flat` leaves it out.
 */
import { fix, sizeLabel, table } from '../lib/format';
import { SHAPE_NAMES, SHAPES } from '../lib/shapes';
import type { ShapeRun } from './shape-steps';
import type { Target } from '../lib/types';

export const FLAT_ROWS = 1_000_000;

/** The import's seconds per 1M rows at the run's size at most this share away from the 1M figure. */
export const FLAT_TOLERANCE = 0.1;

export interface FlatRow {
  step: string;
  /** rows of the small file and of the run's */
  smallRows: number;
  fullRows: number;
  /** seconds per 1M rows on the small file and on the run's */
  small: number;
  full: number;
  /** full / small */
  ratio: number;
  /** whether the row carries the target (the imports) */
  targeted: boolean;
}

export function flatRows(runs: ShapeRun[]): FlatRow[] {
  const out: FlatRow[] = [];
  const perM = (seconds: number, rows: number) => (seconds * 1e6) / rows;
  for (const name of SHAPE_NAMES) {
    const run = runs.find((r) => r.shape === name);
    const flat = run?.flat;
    if (!run || !flat) continue;
    const shape = SHAPES[name];
    const pairs = [
      ['dba A', flat.dba?.a.seconds, run.dba?.a.seconds, 'a', false],
      ['dba B', flat.dba?.b?.seconds, run.dba?.b?.seconds, 'b', false],
      ['import A', flat.importA?.seconds, run.importA?.seconds, 'a', true],
      ['import B', flat.importB?.seconds, run.importB?.seconds, 'b', true],
    ] as const;
    for (const [step, small, full, key, targeted] of pairs) {
      const smallFile = flat.files[key];
      const fullFile = run.files[key];
      if (small === undefined || full === undefined || !smallFile || !fullFile) continue;
      const s = perM(small, smallFile.rows);
      const f = perM(full, fullFile.rows);
      out.push({
        step: shape.label(step),
        smallRows: smallFile.rows,
        fullRows: fullFile.rows,
        small: s,
        full: f,
        ratio: f / s,
        targeted,
      });
    }
  }
  return out;
}

export function flatTable(rows: FlatRow[]): string {
  const [small, full] = [sizeLabel(rows[0]?.smallRows ?? 0), sizeLabel(rows[0]?.fullRows ?? 0)];
  const head = ['step', `at ${small}`, `at ${full}`, `x ${small}`, 'target'];
  const cells = rows.map((r) => [
    r.step,
    fix(r.small, 2),
    fix(r.full, 2),
    fix(r.ratio, 2),
    r.targeted ? `${fix(1 - FLAT_TOLERANCE, 2)}-${fix(1 + FLAT_TOLERANCE, 2)}` : '-',
  ]);
  return `seconds per 1M rows, the ${small} files against the run's ${full}, in this run\n${table(head, cells)}`;
}

export function flatTargets(rows: FlatRow[]): Target[] {
  return rows
    .filter((r) => r.targeted)
    .map((r) => ({
      name:
        `${r.step} seconds per 1M rows at ${sizeLabel(r.fullRows)} vs at ${sizeLabel(r.smallRows)} ` +
        `(${fix(r.full, 2)} / ${fix(r.small, 2)} s)`,
      value: `${fix(r.ratio, 2)} x`,
      target: `within ${Math.round(FLAT_TOLERANCE * 100)} %`,
      pass: Math.abs(r.ratio - 1) <= FLAT_TOLERANCE,
    }));
}

/**
 * The bench's file shapes side by side: `wide` (dataset.ts: Email, Brand and 11 attributes, ~187
 * bytes a row, the bench's file since its start) and `narrow` (narrow.ts: Email and 5 attributes,
 * ~75 bytes). What every step that reads a file needs of its shape: the header, the schema the
 * account gets, the row model the generator writes and the verifier recomputes, the dba step's
 * statement, the file's name and how its rows are labelled in the tables.
 */
import type { AttributeType } from '../../src/schema/service';
import {
  ATTRIBUTES,
  BRANDS,
  COLUMNS,
  lastRowOf,
  rowAt,
  sampleNormalOf,
  WIDE_KINDS,
  type Kind,
  type Row,
  type RowKinds,
} from './dataset';
import {
  NARROW_ATTRIBUTES,
  NARROW_COLUMNS,
  NARROW_DUPLICATE_REACH,
  narrowDupTarget,
  narrowKind,
  narrowRowAt,
} from './narrow';

export const SHAPE_NAMES = ['wide', 'narrow'] as const;
export type ShapeName = (typeof SHAPE_NAMES)[number];

export interface Shape {
  name: ShapeName;
  /** the file's header, sent as the import's `columns` */
  columns: readonly string[];
  /** the schema attributes the bench's account gets (bench/lib/account.ts) */
  attributes: readonly { name: string; type: AttributeType }[];
  /** the brands the account gets (none for a shape without a Brand column) */
  brands: readonly string[];
  kindOf(i: number): Kind;
  rowAt(i: number, variant: number): Row;
  lastRowFor(j: number, rows: number): number;
  sampleNormalRows(rows: number, count: number, salt?: number): number[];
  /** the dba step's statement, a file of bench/steps/dba/ */
  upsertFile: string;
  /** `contacts-<rows>-<a|b>.csv`; the narrow shape's carry its name */
  fileName(rows: number, variant: number): string;
  /** '' for the wide shape (its rows keep the names they had before the narrow one), else ` (narrow)` */
  suffix: string;
  /**
   * A step's name in the tables: `import A` and `import A (narrow)`, `dba A (COPY + upsert)` and
   * `dba A (narrow, COPY + upsert)`.
   */
  label(step: string, note?: string): string;
}

function shape(
  name: ShapeName,
  kinds: RowKinds,
  rest: Pick<Shape, 'columns' | 'attributes' | 'brands' | 'rowAt' | 'upsertFile' | 'suffix'>,
): Shape {
  const tag = name === 'wide' ? '' : `-${name}`;
  return {
    name,
    ...rest,
    kindOf: kinds.kindOf,
    lastRowFor: (j, rows) => lastRowOf(kinds, j, rows),
    sampleNormalRows: (rows, count, salt) => sampleNormalOf(kinds, rows, count, salt),
    fileName: (rows, variant) => `contacts-${rows}${tag}-${variant ? 'b' : 'a'}.csv`,
    label(step, note) {
      const within = [name === 'wide' ? undefined : name, note].filter(Boolean);
      return within.length ? `${step} (${within.join(', ')})` : step;
    },
  };
}

export const SHAPES: Record<ShapeName, Shape> = {
  wide: shape('wide', WIDE_KINDS, {
    columns: COLUMNS,
    attributes: ATTRIBUTES,
    brands: BRANDS,
    rowAt,
    upsertFile: 'upsert.sql',
    suffix: '',
  }),
  narrow: shape(
    'narrow',
    { kindOf: narrowKind, dupTarget: narrowDupTarget, reach: NARROW_DUPLICATE_REACH },
    {
      columns: NARROW_COLUMNS,
      attributes: NARROW_ATTRIBUTES,
      brands: [],
      rowAt: narrowRowAt,
      upsertFile: 'upsert-narrow.sql',
      suffix: ' (narrow)',
    },
  ),
};

/** The shape of a generated file: its meta's, or wide for a file cached before there were two. */
export const shapeOf = (file: { shape?: ShapeName }): Shape => SHAPES[file.shape ?? 'wide'];

/** The order the per-shape steps run in: narrow first (bench/steps/shape-steps.ts says why). */
export const RUN_ORDER: readonly ShapeName[] = ['narrow', 'wide'];

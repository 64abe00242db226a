/**
 * A result file as the report reads it. Nearly every field is optional: the JSON of older runs holds
 * less, and before file shapes (bench/lib/shapes.ts) it kept `l1`, `dba` and `imports` at the top.
 * The report reads JSON, not the steps' types, so that a file of any age still draws, and so that
 * a step that adds a field (pgloader's) appears here without the report importing that step.
 */
export type CpuSample = Record<string, number>;

export interface FileInfo {
  rows: number;
  bytes: number;
}

export interface Timed {
  seconds: number;
}

export interface ImportSample {
  at: number;
  phase: string;
  merged: number;
  readBytes?: number;
  cpu?: CpuSample;
}

export interface ImportData extends Timed {
  phases?: { phase: string; seconds: number }[];
  cpu?: { phase: string; cpu: CpuSample }[];
  series?: ImportSample[];
  view?: { rowCount?: number };
}

export interface ShapeData {
  shape: string;
  files?: { a?: FileInfo; b?: FileInfo };
  l1?: Timed;
  dba?: { a?: Timed; b?: Timed };
  /** bench/steps/pgloader.ts, once results carry it: the load of each file */
  pgloader?: { a?: Timed; b?: Timed };
  importA?: ImportData;
  importB?: ImportData;
  /** the same steps on the run's 1M files of this shape, when it has more rows (bench/steps/flat.ts) */
  flat?: Omit<ShapeData, 'shape' | 'flat' | 'l1'>;
}

export interface LatencyWindow {
  at: number;
  requests: number;
  p50?: number;
  p99?: number;
}

export interface KindFigures {
  scenario: string;
  /** absent in the mixed step's first form */
  requests?: number;
  p50?: number;
  p99?: number;
}

export interface MixedSpan {
  name: string;
  seconds: number;
  judged?: boolean;
  kinds: KindFigures[];
}

export interface MixedData {
  /** the imported file's shape (absent: wide, as every run before `--mixed-shape`) */
  shape?: string;
  idle: MixedSpan;
  idleAfter?: MixedSpan;
  phases: MixedSpan[];
  p99RatioTarget?: number;
  series?: {
    windowSeconds: number;
    phases: { phase: string; at: number }[];
    kinds: { scenario: string; windows: LatencyWindow[] }[];
  };
}

export interface ExportLoadSpan {
  name: string;
  seconds: number;
  requests: number;
  p50?: number;
  p99?: number;
  series?: LatencyWindow[];
}

/** The mixed step's first form: one span of load while the merge ran, against one idle span before it. */
export interface MergeOnlyMixed {
  idle: KindFigures[];
  merging: KindFigures[];
  seconds: number;
  p99RatioTarget?: number;
}

export interface ExportData {
  /** idle before the first export, between each two and after the last */
  idles?: ExportLoadSpan[];
  /** before `idles`: one idle span before both exports and one after them (or before only) */
  idle?: ExportLoadSpan;
  idleAfter?: ExportLoadSpan;
  loaded: { load: ExportLoadSpan }[];
}

export interface HttpRowData {
  scenario: string;
  target: string;
  reqPerSec: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  ratio?: number;
  minRatio?: number;
}

export interface TargetData {
  name: string;
  value: string;
  target: string;
  pass: boolean;
  judged?: boolean;
}

export interface ResultData {
  runId?: string;
  rows?: number;
  options?: { steps?: string[] };
  machine?: Record<string, string | number>;
  error?: string;
  verification?: string;
  shapes?: ShapeData[];
  files?: { a?: FileInfo; b?: FileInfo };
  l1?: Timed;
  dba?: { a?: Timed; b?: Timed };
  imports?: { a?: ImportData; b?: ImportData };
  mixed?: MixedData | MergeOnlyMixed;
  export?: ExportData;
  http?: HttpRowData[];
  targets?: TargetData[];
}

/** The run's file shapes, an older result's top-level steps read as the wide shape's. */
export function shapesOf(r: ResultData): ShapeData[] {
  if (r.shapes?.length) return r.shapes;
  if (!r.l1 && !r.dba && !r.imports) return [];
  return [
    {
      shape: 'wide',
      files: r.files,
      l1: r.l1,
      dba: r.dba,
      importA: r.imports?.a,
      importB: r.imports?.b,
    },
  ];
}

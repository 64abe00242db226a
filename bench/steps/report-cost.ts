/**
 * Step `report` (an extension beyond the contract): what the rejected-rows report costs an import.
 * Two files: file A as it is (1.5% of its rows rejected: 0.5% malformed, 1% duplicates) and a clean
 * file of A's normal rows only. Each is imported 24 times through the real flow, each time into a
 * fresh account, with the worker started with REJECTED_ROWS_REPORT in ORDER's mirrored blocks (a
 * drift over the runs falls on both sides alike, and so does a run's place in its block). Every run
 * is verified after its timing: the counts, the account's contacts, and the report itself (its
 * lines per reason add up to each counter) or its absence (no rejectedRowsUrl, 404). The run's
 * contacts are then deleted and the table vacuumed, so every run starts from the same table and the
 * step needs disk for one set of contacts at a time.
 */
import { createReadStream, existsSync } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import type { Sql } from '../../src/db';
import { REASONS, type Counter, type Reason } from '../../src/imports/rejections';
import { createBenchAccount, dropAccountContacts, type BenchAccount } from '../lib/account';
import { kindOf } from '../lib/dataset';
import type { FileMeta } from '../lib/generate';
import { runImportFlow, type ImportOptions, type ImportRun } from '../lib/import-flow';
import { median, Progress } from '../lib/format';
import type { Service } from '../lib/services';
import { checkImport, VerificationError } from '../lib/verify';

/** The target: the report costs at most this share of the import's time. */
export const REPORT_COST_TARGET_PERCENT = 3;
/**
 * Off, on, on, off, then on, off, off, on, three times (24 runs a file, twelve neighbouring pairs
 * for the paired median). A pair of runs of one setting was 9-35 % apart on this machine; with four
 * pairs one step run said +9 % and the next −1 % for the same code, and with ABBA alone the report-on
 * runs always held the second and third place of four, which in an A/A run (the report off on
 * both sides) were 2.5 % slower than the first and fourth. Mirrored blocks give each setting
 * every place of a block equally often, and a drift over the step still moves both runs of a pair.
 */
const ORDER: readonly boolean[] = Array.from({ length: 24 }, (_, k) => {
  const inner = k % 4 === 1 || k % 4 === 2;
  return Math.floor(k / 4) % 2 === 0 ? inner : !inner;
});

export interface CleanMeta extends FileMeta {
  /** the file A it was made from, as its meta said */
  source: { path: string; bytes: number; rows: number; variant: number; version: number };
}

export interface ReportCostRun {
  report: boolean;
  importId: string;
  seconds: number;
  /**
   * The worker's own clock: started_at → completed_at of the import (the report is written before the
   * commit that sets completed_at), free of the 100 ms sampling and of the wait for the job
   */
  workerSeconds: number;
  /** merge done → success: where the worker writes the report */
  finishSeconds: number;
  workerPeakRssMb?: number;
  /** lines of the report (0 when it has none) */
  reportLines: number;
  phases: ImportRun['phases'];
}

/** One setting's runs: the median of each figure. */
interface Side {
  seconds: number;
  workerSeconds: number;
  finishSeconds: number;
  /** the highest peak of the side's runs */
  workerPeakRssMb?: number;
}

export interface ReportCostFile {
  file: 'A' | 'clean';
  path: string;
  rows: number;
  rejected: number;
  /** in the order they ran: ORDER */
  runs: ReportCostRun[];
  off: Side;
  on: Side;
  /** the median over neighbouring (off, on) pairs of runs of (on − off) / off, in % */
  costPercent: number;
  /** the same by the worker's clock */
  workerCostPercent: number;
  /**
   * How far the runs of one setting lie apart (slowest − fastest), in % of their mean (the larger of
   * off's and on's): a cost smaller than this is within the noise of the machine.
   */
  spreadPercent: number;
  targetPercent: number;
  met: boolean;
}

/** `contacts-<N>-a-clean.csv` beside file A. */
export const cleanPath = (pathA: string) => pathA.replace(/\.csv$/, '-clean.csv');

/**
 * File A's header and normal rows, line for line (no duplicates, nothing malformed), made when
 * missing or made from another file A. Streamed: each line of A is one row (the generator writes no
 * quoted line break), so the row model says which to keep without parsing.
 */
export async function cleanFile(plain: FileMeta, log: (m: string) => void): Promise<CleanMeta> {
  const path = cleanPath(plain.path);
  const { version, bytes, rows, variant } = plain;
  const source = { path: plain.path, bytes, rows, variant, version };
  const meta = (await Bun.file(`${path}.meta.json`)
    .json()
    .catch(() => undefined)) as CleanMeta | undefined;
  if (
    meta &&
    JSON.stringify(meta.source) === JSON.stringify(source) &&
    existsSync(path) &&
    (await stat(path)).size === meta.bytes
  ) {
    log(`[report] reusing ${path} (${(meta.bytes / 1e6).toFixed(1)} MB)`);
    return meta;
  }
  const tmp = `${path}.partial`;
  await rm(tmp, { force: true });
  const writer = Bun.file(tmp).writer({ highWaterMark: 4 << 20 });
  const progress = new Progress('clean file', Math.round(plain.bytes / 1e6), 'MB');
  let line = -1; // the header; data row i is line i
  let keep = true;
  let read = 0;
  let written = 0;
  let kept = 0;
  for await (const chunk of createReadStream(plain.path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    // Runs of kept lines are written as one slice.
    let from = keep ? 0 : -1;
    for (let at = 0; ;) {
      const nl = chunk.indexOf(10, at);
      if (nl === -1) break;
      if (keep && line >= 0) kept++;
      line++;
      at = nl + 1;
      const next = kindOf(line) === 'normal';
      if (keep && !next) {
        written += at - from;
        writer.write(chunk.subarray(from, at));
        from = -1;
      } else if (!keep && next) from = at;
      keep = next;
    }
    if (from !== -1 && from < chunk.length) {
      written += chunk.length - from;
      writer.write(chunk.subarray(from));
    }
    await writer.flush();
    read += chunk.length;
    progress.update(Math.round(read / 1e6));
  }
  await writer.end();
  if (line !== plain.rows || kept !== plain.normal || (await stat(tmp)).size !== written)
    throw new Error(
      `clean file: ${line} rows read (expected ${plain.rows}), ${kept} kept (expected ${plain.normal}), ` +
        `${(await stat(tmp)).size} bytes written (expected ${written})`,
    );
  progress.done();
  const made: CleanMeta = {
    version,
    path,
    rows: kept,
    variant,
    bytes: written,
    normal: kept,
    duplicates: 0,
    malformed: 0,
    source,
  };
  await rename(tmp, path);
  await Bun.write(`${path}.meta.json`, JSON.stringify(made, null, 2));
  return made;
}

interface Ctx {
  baseUrl: string;
  sql: Sql;
  workerPid: number;
}

/**
 * The 24 runs of each file (ORDER). The worker is started afresh before every run (not only when the
 * setting switches), so no run has a worker warmed by the one before; after the last run a worker
 * with the default settings runs again. `ctx.workerPid` follows the worker.
 */
export async function runReportCost(
  ctx: Ctx,
  service: Service,
  runId: string,
  files: { a: FileMeta; clean: CleanMeta },
  opts: ImportOptions & { samples: number },
  log: (m: string) => void,
): Promise<ReportCostFile[]> {
  const out: ReportCostFile[] = [];
  for (const [name, file] of [
    ['A', files.a],
    ['clean', files.clean],
  ] as const) {
    const runs: ReportCostRun[] = [];
    for (const [k, report] of ORDER.entries()) {
      const label = `report ${report ? 'on' : 'off'} ${name} ${k + 1}/${ORDER.length}`;
      const worker = await service.restartWorker(`report-${report ? 'on' : 'off'}`, {
        REJECTED_ROWS_REPORT: String(report),
      });
      ctx.workerPid = worker.proc.pid;
      const account = await createBenchAccount(ctx.sql, `${runId} ${label}`);
      const run = await runImportFlow(ctx, account, file, label, opts);
      const reportLines = await verifyRun(ctx, account, file, run, report, label, name === 'A' ? opts.samples : 0);
      const [{ s: workerSeconds } = { s: Number.NaN }] = await ctx.sql<{ s: number }[]>`
        select extract(epoch from completed_at - started_at)::float8 as s from contact_imports
        where account_id = ${account.id} and id = ${run.view.id}`;
      log(`[report] ${label} verified: ${run.seconds.toFixed(2)} s, ${reportLines} report lines`);
      await dropAccountContacts(ctx.sql, account.id);
      runs.push({
        report,
        importId: run.view.id,
        seconds: run.seconds,
        workerSeconds,
        finishSeconds: run.phases.filter((p) => p.phase === 'finish').reduce((s, p) => s + p.seconds, 0),
        workerPeakRssMb: run.workerPeakRssMb,
        reportLines,
        phases: run.phases,
      });
    }
    const side = (on: boolean): Side => {
      const rs = runs.filter((r) => r.report === on);
      const rss = rs.map((r) => r.workerPeakRssMb).filter((x) => x !== undefined);
      return {
        seconds: median(rs.map((r) => r.seconds)),
        workerSeconds: median(rs.map((r) => r.workerSeconds)),
        finishSeconds: median(rs.map((r) => r.finishSeconds)),
        workerPeakRssMb: rss.length ? Math.max(...rss) : undefined,
      };
    };
    const off = side(false);
    const on = side(true);
    // The cost: the median over the ORDER's neighbouring pairs (off, on), (on, off), … of what the
    // run with the report took more than the one without. A pair runs within a minute, so a machine
    // that slows down or speeds up over the step moves both of a pair alike, and one run slowed by
    // something else (one in eight was 30 % slower in every phase) moves one pair, not the median.
    const paired = (f: (r: ReportCostRun) => number) => {
      const costs: number[] = [];
      for (let k = 0; k + 1 < runs.length; k += 2) {
        const [x, y] = [runs[k]!, runs[k + 1]!];
        const [withIt, without] = x.report ? [x, y] : [y, x];
        costs.push(((f(withIt) - f(without)) / f(without)) * 100);
      }
      return median(costs);
    };
    const costPercent = paired((r) => r.seconds);
    const spread = (report: boolean) => {
      const xs = runs.filter((r) => r.report === report).map((r) => r.seconds);
      return ((Math.max(...xs) - Math.min(...xs)) / (xs.reduce((a, b) => a + b, 0) / xs.length)) * 100;
    };
    out.push({
      file: name,
      path: file.path,
      rows: file.rows,
      rejected: file.malformed + file.duplicates,
      runs,
      off,
      on,
      costPercent,
      workerCostPercent: paired((r) => r.workerSeconds),
      spreadPercent: Math.max(spread(false), spread(true)),
      targetPercent: REPORT_COST_TARGET_PERCENT,
      met: costPercent <= REPORT_COST_TARGET_PERCENT,
    });
  }
  ctx.workerPid = (await service.restartWorker('default', {})).proc.pid;
  return out;
}

/** The run's end state; returns the report's line count. Any difference throws. */
async function verifyRun(
  ctx: Ctx,
  account: BenchAccount,
  file: FileMeta,
  run: ImportRun,
  report: boolean,
  label: string,
  samples: number,
): Promise<number> {
  const v = run.view;
  await checkImport(ctx, account, file, v, { label, mode: 'added', variants: [0], samples });
  const rejected = v.malformedCount + (v.duplicateInFileCount ?? 0) + (v.skippedCount ?? 0);
  const reportPath = `/v1/contact-imports/${v.id}/rejected-rows`;
  const auth = { authorization: `Bearer ${account.key}` };
  if (!report || rejected === 0) {
    if (v.rejectedRowsUrl !== undefined) throw new VerificationError(`${label}: rejectedRowsUrl without a report`);
    const res = await fetch(`${ctx.baseUrl}${reportPath}`, { headers: auth });
    await res.arrayBuffer();
    if (res.status !== 404) throw new VerificationError(`${label}: GET ${reportPath} answered ${res.status}, not 404`);
    return 0;
  }
  if (v.rejectedRowsUrl !== `${ctx.baseUrl}${reportPath}`)
    throw new VerificationError(
      `${label}: rejectedRowsUrl is ${v.rejectedRowsUrl}, expected ${ctx.baseUrl}${reportPath}`,
    );
  const res = await fetch(v.rejectedRowsUrl, { headers: auth });
  if (res.status !== 200 || !res.body) throw new VerificationError(`${label}: GET the report answered ${res.status}`);
  const got = await countReport(res.body, label);
  const want = {
    malformed: v.malformedCount,
    duplicateInFile: v.duplicateInFileCount ?? 0,
    skipped: v.skippedCount ?? 0,
  };
  if (JSON.stringify(got.perCounter) !== JSON.stringify(want) || got.lines !== rejected)
    throw new VerificationError(
      `${label}: the report has ${got.lines} lines, ${JSON.stringify(got.perCounter)} per counter ` +
        `(${JSON.stringify(got.perReason)} per reason); the import counted ${JSON.stringify(want)}`,
    );
  return got.lines;
}

/**
 * Lines of the report per reason and per counter, streamed. A line is `row,reason,column,detail,cells`:
 * the reason is its second field, never quoted. The bench's files have no quoted line break, so a line
 * that does not start with a row number and a known reason is an error, not a continuation.
 */
export async function countReport(body: ReadableStream<Uint8Array>, label: string) {
  const perReason: Partial<Record<Reason, number>> = {};
  const perCounter: Record<Counter, number> = { malformed: 0, duplicateInFile: 0, skipped: 0 };
  let lines = 0;
  let header = true;
  let rest = '';
  const take = (line: string) => {
    if (header) {
      if (!line.startsWith('row,reason,column,detail,'))
        throw new VerificationError(`${label}: the report starts with "${line.slice(0, 80)}"`);
      header = false;
      return;
    }
    const m = /^\d+,([a-z_]+),/.exec(line);
    const reason = m?.[1] as Reason | undefined;
    if (!reason || !(reason in REASONS))
      throw new VerificationError(`${label}: report line ${lines + 1} is "${line.slice(0, 80)}"`);
    perReason[reason] = (perReason[reason] ?? 0) + 1;
    perCounter[REASONS[reason].counter]++;
    lines++;
  };
  const decoder = new TextDecoder();
  const reader = body.getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    const parts = (rest + decoder.decode(r.value, { stream: true })).split('\n');
    rest = parts.pop()!;
    for (const line of parts) take(line);
  }
  rest += decoder.decode();
  if (rest) take(rest);
  if (header) throw new VerificationError(`${label}: the report is empty`);
  return { lines, perReason, perCounter };
}

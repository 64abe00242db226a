/**
 * One contact import through the real flow: POST /v1/contact-imports with the columns, PUT the file
 * to uploadUrl streamed from disk, then poll GET /v1/contact-imports/{id} until it is final. Timed
 * from the end of the upload to `success`. While it runs, the import's `phase` column is sampled so
 * the report can say where the time went (read = parse + validate + hash + COPY to staging, dedupe,
 * merge, finish = merge done until success), and the worker's peak RSS is read from /proc.
 */
import { createReadStream } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Sql } from '../../src/db';
import { cpuDelta, type CpuSample } from './cpu';
import type { BenchAccount } from './account';
import type { RunFiles } from './files';
import type { FileMeta } from './generate';
import { Progress } from './format';
import { procKb, readOffset, resetPeakRss } from './services';
import { shapeOf } from './shapes';

export interface ImportView {
  id: string;
  status: string;
  percentComplete?: number;
  rowCount?: number;
  addedCount: number;
  updatedCount?: number;
  skippedCount?: number;
  malformedCount: number;
  duplicateInFileCount?: number;
  failureReason?: string;
  completedAt?: string;
  /** only while the import has a rejected-rows report (an extension beyond the contract) */
  rejectedRowsUrl?: string;
}

export interface PhaseSpan {
  phase: string;
  seconds: number;
}

export interface ImportRun {
  view: ImportView;
  uploadSeconds: number;
  /** end of upload → success observed */
  seconds: number;
  phases: PhaseSpan[];
  workerPeakRssMb?: number;
  /**
   * Merge speed as seconds per 100,000 rows between checkpoint moves (two batches in flight commit
   * back to back, so one sample can cover several), to spot a merge that slows down as it goes.
   */
  mergeBatches?: { count: number; min: number; median: number; max: number; first: number; last: number };
  note?: string;
  /**
   * PostgreSQL's writes of dirty pages during the import (pg_stat_bgwriter, the whole cluster): how
   * many checkpoints ran and who wrote the pages, the checkpointer, the background writer, or the
   * backends themselves (which then wait for the writes: a lead for a per-row cost that grows with
   * the file).
   */
  pageWrites?: PageWrites;
  /** CPU seconds each process spent in each phase (with `sampleCpu`) */
  cpu?: { phase: string; cpu: CpuSample }[];
  /** the import looked at once a second (less often as a long one goes on) from the upload's end to success */
  series?: ImportSample[];
}

/**
 * One look at a running import. Rows a second and each process's CPU over time are the differences
 * of two looks (bench/report/import-timeline.ts); the phase totals above cannot show a merge that
 * slows as it goes, or a read that waits for PostgreSQL.
 */
export interface ImportSample {
  /** seconds since the upload's end */
  at: number;
  phase: string;
  /** rows merged so far (the import's checkpoint) */
  merged: number;
  /** bytes of the file the worker had read, in the read phase (its file descriptor's offset) */
  readBytes?: number;
  /** CPU seconds so far by process (cpu.ts), with `sampleCpu` */
  cpu?: CpuSample;
}

/** How often the series looks at first: once a second costs one read of /proc, as SystemSampler's. */
const SERIES_MS = 1000;
/**
 * Looks kept at most: at this many, every other one goes and the pace halves, so the looks stay
 * evenly spread and an hour's import adds tens of kB to the result file, not a megabyte. A chart of
 * 860 px needs no more.
 */
const SERIES_MAX = 240;

export interface PageWrites {
  checkpoints: number;
  checkpointer: number;
  bgwriter: number;
  backends: number;
}

async function pageWrites(sql: Sql): Promise<PageWrites | undefined> {
  const [r] = await sql<{ c: string; cp: string; bg: string; be: string }[]>`
    select checkpoints_timed + checkpoints_req as c, buffers_checkpoint as cp, buffers_clean as bg,
           buffers_backend as be
    from pg_stat_bgwriter`.catch(() => []);
  return r && { checkpoints: Number(r.c), checkpointer: Number(r.cp), bgwriter: Number(r.bg), backends: Number(r.be) };
}

const diffWrites = (a: PageWrites, b: PageWrites): PageWrites => ({
  checkpoints: b.checkpoints - a.checkpoints,
  checkpointer: b.checkpointer - a.checkpointer,
  bgwriter: b.bgwriter - a.bgwriter,
  backends: b.backends - a.backends,
});

function batchStats(moves: { at: number; checkpoint: number }[]): ImportRun['mergeBatches'] {
  const per100k = moves.slice(1).flatMap((m, k) => {
    const rows = m.checkpoint - moves[k]!.checkpoint;
    return rows > 0 ? [((m.at - moves[k]!.at) / 1000) * (100_000 / rows)] : [];
  });
  if (per100k.length === 0) return undefined;
  const sorted = [...per100k].sort((a, b) => a - b);
  return {
    count: per100k.length,
    min: sorted[0]!,
    median: sorted[Math.floor(sorted.length / 2)]!,
    max: sorted.at(-1)!,
    first: per100k[0]!,
    last: per100k.at(-1)!,
  };
}

export interface ImportOptions {
  strategy: 'overwrite' | 'keep' | 'skip';
  pollMs: number;
  timeoutSeconds: number;
  /** CPU seconds of the processes the import runs on, sampled as it starts, at each phase change and at its end */
  sampleCpu?: () => Promise<CpuSample>;
  /** the run's generated files: generated again before the upload if a lean run deleted it, deleted after */
  files?: RunFiles;
  /**
   * Each phase as the 100 ms sample first sees it (`finish` told apart, `success` last), with its
   * performance.now(); the first call comes right after the upload's end.
   */
  onPhase?: (phase: string, at: number) => void;
}

async function api<T>(
  baseUrl: string,
  key: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

/**
 * Where an import step is, as a share of its time, for the run's progress line and ETA
 * (lib/run-clock.ts): the upload, then the read by how far into the file the worker is, the dedupe
 * (no progress of its own: held at its start), the merge by the rows merged. The shares are the
 * phases' at 25M rows, both files and shapes (bench/findings/2026-12-07-default-run-25m.md: read
 * 24-38 %, dedupe 16-25 %, merge 41-57 %; the upload a few seconds of minutes). The import's own line
 * shows its percentComplete, which counts merged rows only: 0 through the read and the dedupe.
 */
const STEP_SHARE = { upload: 0.03, read: 0.32, dedupe: 0.2 };
export function importStepFraction(phase: string, fileRead: number, merged: number): number {
  const { upload, read, dedupe } = STEP_SHARE;
  if (phase === 'upload') return upload * fileRead;
  if (phase === 'read') return upload + read * fileRead;
  if (phase === 'dedupe') return upload + read;
  if (phase === 'merge') return upload + read + dedupe + (1 - upload - read - dedupe) * merged;
  if (phase === 'finish' || phase === 'success') return 1;
  return upload; // queued, starting
}

/** PUT with a Content-Length (as S3 requires), streamed from disk with a progress line. */
async function upload(url: string, file: FileMeta, label: string): Promise<void> {
  const progress = new Progress(`${label} upload`, Math.round(file.bytes / 1e6), 'MB');
  let sent = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      sent += chunk.length;
      progress.update(Math.round(sent / 1e6), '', importStepFraction('upload', sent / file.bytes, 0));
      done(null, chunk);
    },
  });
  const u = new URL(url);
  const request = u.protocol === 'https:' ? httpsRequest : httpRequest;
  const req = request(u, {
    method: 'PUT',
    headers: { 'content-type': 'text/csv', 'content-length': String(file.bytes) },
  });
  const answered = new Promise<{ status: number; text: string }>((resolve, reject) => {
    req.once('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.once('error', reject);
  });
  await pipeline(createReadStream(file.path, { highWaterMark: 1 << 20 }), counter, req);
  const { status, text } = await answered;
  if (status < 200 || status > 299) throw new Error(`upload refused: ${status} ${text.slice(0, 300)}`);
  progress.done('', importStepFraction('upload', 1, 0));
}

export async function runImportFlow(
  ctx: { baseUrl: string; sql: Sql; workerPid: number },
  account: BenchAccount,
  file: FileMeta,
  label: string,
  opts: ImportOptions,
): Promise<ImportRun> {
  // Before the import exists: a lean run may generate the file again first (a minute at 25M rows),
  // which an open import's upload link should not wait for.
  await opts.files?.ready(file);
  const created = await api<{ id: string; uploadUrl: string }>(
    ctx.baseUrl,
    account.key,
    'POST',
    '/v1/contact-imports',
    {
      columns: shapeOf(file).columns,
      duplicateContactStrategy: opts.strategy,
    },
  );
  if (created.status !== 201)
    throw new Error(`${label}: create import answered ${created.status} ${JSON.stringify(created.body)}`);
  const { id, uploadUrl } = created.body;
  const rssReset = await resetPeakRss(ctx.workerPid);

  const uploadStarted = performance.now();
  await upload(uploadUrl, file, label);
  const started = performance.now();
  const writesBefore = await pageWrites(ctx.sql);
  await opts.files?.read(file);
  const uploadSeconds = (started - uploadStarted) / 1000;

  const progress = new Progress(`${label} import`, 100, '%');
  const phases: { phase: string; at: number; cpu?: CpuSample }[] = [];
  const deadline = started + opts.timeoutSeconds * 1000;
  let view: ImportView | undefined;
  let lastGet = 0;
  const checkpointMoves: { at: number; checkpoint: number }[] = [];
  let lastCheckpoint = -1;
  let series: ImportSample[] = [];
  let lastLook = -Infinity;
  let lookEveryMs = SERIES_MS;
  for (;;) {
    // The phase column is sampled often (cheap, direct SQL); the API is polled like a client would.
    const [row] = await ctx.sql<
      { status: string; phase: string | null; checkpoint: number; row_count: number | null }[]
    >`
      select status, phase, checkpoint, row_count from contact_imports where account_id = ${account.id} and id = ${id}`;
    let phase = row?.status === 'importing' ? (row.phase ?? 'starting') : (row?.status ?? 'missing');
    // The worker's finish (the rejected-rows report, then success) runs under phase `merge` once every
    // row is merged: the checkpoint at rowCount tells it apart.
    if (phase === 'merge' && row!.row_count !== null && row!.checkpoint >= row!.row_count) phase = 'finish';
    if (phases.at(-1)?.phase !== phase) {
      const at = performance.now();
      opts.onPhase?.(phase, at);
      phases.push({ phase, at, cpu: await opts.sampleCpu?.() });
    }
    if (performance.now() - lastLook >= lookEveryMs && row) {
      lastLook = performance.now();
      const readBytes = phase === 'read' ? await readOffset(ctx.workerPid, id) : undefined;
      const cpu = await opts.sampleCpu?.();
      const at = (lastLook - started) / 1000;
      series.push({
        at,
        phase,
        merged: row.checkpoint,
        ...(readBytes !== undefined && { readBytes }),
        ...(cpu && { cpu }),
      });
      if (series.length >= SERIES_MAX) {
        series = series.filter((_, k) => k % 2 === 0);
        lookEveryMs *= 2;
      }
    }
    if (phase === 'merge' && row!.checkpoint !== lastCheckpoint) {
      // The first sight of the merge phase starts the clock; each checkpoint move ends a sample.
      lastCheckpoint = row!.checkpoint;
      checkpointMoves.push({ at: performance.now(), checkpoint: lastCheckpoint });
    } else if (phase !== 'merge' && checkpointMoves.length > 0 && lastCheckpoint !== row?.row_count) {
      // The last checkpoint move was not seen in the merge phase: it ended with the phase.
      lastCheckpoint = row?.row_count ?? -1;
      checkpointMoves.push({ at: performance.now(), checkpoint: lastCheckpoint });
    }
    if (performance.now() - lastGet >= opts.pollMs || row?.status === 'success' || row?.status === 'failed') {
      lastGet = performance.now();
      const got = await api<ImportView>(ctx.baseUrl, account.key, 'GET', `/v1/contact-imports/${id}`);
      if (got.status !== 200)
        throw new Error(`${label}: GET import answered ${got.status} ${JSON.stringify(got.body)}`);
      view = got.body;
      if (view.status === 'success' || view.status === 'failed') break;
      // percentComplete counts merged rows: during read, how far the worker is into the file says more.
      const offset = phase === 'read' ? await readOffset(ctx.workerPid, id) : undefined;
      const into = offset === undefined ? '' : ` (${Math.floor((100 * offset) / file.bytes)}% of the file read)`;
      const percent = view.percentComplete ?? 0;
      const step = importStepFraction(phase, offset === undefined ? 0 : offset / file.bytes, percent / 100);
      progress.update(percent, `${view.status}${phase !== view.status ? ` / ${phase}` : ''}${into}`, step);
    }
    if (performance.now() > deadline)
      throw new Error(`${label}: import ${id} not final after ${opts.timeoutSeconds} s (status ${view?.status})`);
    await Bun.sleep(100);
  }
  const ended = performance.now();
  const writesAfter = await pageWrites(ctx.sql);
  if (view.status !== 'success') throw new Error(`${label}: import ${id} failed: ${view.failureReason}`);
  progress.done('success');
  phases.push({ phase: 'end', at: ended, cpu: await opts.sampleCpu?.() });
  const last = phases.at(-1)!;
  series.push({
    at: (ended - started) / 1000,
    phase: 'success',
    merged: view.rowCount ?? 0,
    ...(last.cpu && { cpu: last.cpu }),
  });
  const spans = phases.slice(0, -1).map((p, k) => ({ phase: p.phase, seconds: (phases[k + 1]!.at - p.at) / 1000 }));
  const peakKb = await procKb(ctx.workerPid, 'VmHWM');
  return {
    view,
    uploadSeconds,
    seconds: (ended - started) / 1000,
    phases: spans.filter((s) => s.phase !== 'success'),
    workerPeakRssMb: peakKb === undefined ? undefined : peakKb / 1024,
    mergeBatches: batchStats(checkpointMoves),
    pageWrites: writesBefore && writesAfter ? diffWrites(writesBefore, writesAfter) : undefined,
    cpu: opts.sampleCpu
      ? phases
          .slice(0, -1)
          .map((p, k) => ({ phase: p.phase, cpu: cpuDelta(p.cpu!, phases[k + 1]!.cpu!) }))
          .filter((p) => p.phase !== 'success')
      : undefined,
    ...(rssReset ? {} : { note: 'peak RSS not reset: includes earlier steps' }),
    series,
  };
}

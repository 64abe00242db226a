/**
 * Step `export` (issue 37, the Export's Speed bullet): the bench's account, as the steps before it
 * left it, exported through the real API and worker, against a server-side COPY of the same rows.
 * 1. The baseline: `COPY (<the worker's select>) TO STDOUT` (worker/exports/run.ts exportStatement),
 *    drained by the bench process (postgres.js `readable()`, bytes counted and dropped), timed; before
 *    the exports and after them (the machine drifts), the mean the baseline.
 * 2. An export of every contact, compression none and gzip: POST /v1/contact-exports, its row polled
 *    every 100 ms, timed from the POST to `success`; the worker's peak RSS (VmHWM, reset before, and
 *    VmRSS sampled every 100 ms) and each process's CPU seconds. Then the file is downloaded through
 *    its `downloadUrl` and read with the importer's own CSV reader (worker/import/csv.ts): the header
 *    is the export's columns, every row has every column, the rows are the account's contacts
 *    (`rowCount` = COUNT(*) = the file's data rows), and SAMPLES contacts, read through GET
 *    /v1/contacts/{md5} before the export, are in it once each, every cell as the importer reads it
 *    (readAttributeValue) equal to the API's value. The file is then removed (as the retention sweep
 *    does), so a 25M-row run holds one file at a time.
 * 3. Another account's GET /v1/contacts/{md5} under autocannon (32 connections, mixed.ts's total):
 *    through a bare COPY, then idle for `--duration` seconds before each export, between them and
 *    after them, each answer in the span its request was sent in (phase-latency.ts). Targets: each
 *    export ≤ 3 × the COPY, worker peak RSS ≤ 256 MB, the GET p99 during each export ≤ 2 × idle.
 *    Idle is the mean of the p99s of the two idle spans that bracket the export (bracketP99, which
 *    says why; a loaded export lasts twenty minutes at 25M). The ratio to the run's lowest idle p99
 *    is shown beside it.
 */
import type { Readable } from 'node:stream';
import { Readable as NodeReadable, pipeline } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { Result } from 'autocannon';
import type { Config } from '../../src/config';
import type { Sql } from '../../src/db';
import { exportColumns as defaultColumns } from '../../src/exports/service';
import { getSchema } from '../../src/schema/service';
import { readAttributeValue } from '../../src/schema/values';
import { createStore } from '../../src/storage';
import { removeExpiredExports } from '../../worker/exports/expire';
import { exportStatement } from '../../worker/exports/run';
import { headerLine } from '../../worker/exports/select';
import { parseCsv, utf8Text } from '../../worker/import/csv';
import { createBenchAccount, type BenchAccount } from '../lib/account';
import { cpuDelta, type CpuSample } from '../lib/cpu';
import { load, preflight } from './http';
import type { HttpTarget, PoolContact, Target } from '../lib/types';
import {
  LatencySeries,
  SystemSampler,
  driftSummary,
  seriesSummary,
  worstWindows,
  type SeriesWindow,
} from '../lib/latency-series';
import { bracketP99, PhaseLoad, PhaseTimeline, type Figures } from '../lib/phase-latency';
import { fix, fmtInt, table } from '../lib/format';
import { procKb, resetPeakRss } from '../lib/services';
import { contactPool } from '../lib/baseline';
import { VerificationError } from '../lib/verify';

export const EXPORT_TARGETS = { xCopy: 3, workerRssMb: 256, p99XIdle: 2 };
/** Contacts read through the API and found in each file. */
const SAMPLES = 100;
/** The other account's GET load: mixed.ts's 32 connections, all of them GETs. */
const CONNECTIONS = 32;
/** Fewer answers in a span and its p99 is shown, not judged (mixed.ts: the 10th slowest of 1,000). */
const MIN_REQUESTS = 1000;
const COMPRESSIONS = ['none', 'gzip'] as const;
/** The windows a load span is cut into (latency-series.ts), and how many of the slowest are logged. */
export const SERIES_SECONDS = 10;
const WORST_LOGGED = 5;
type Compression = (typeof COMPRESSIONS)[number];

interface Ctx {
  baseUrl: string;
  sql: Sql;
  workerPid: number;
  apiPid?: number;
}

export interface ExportOptions {
  config: Config;
  seconds: number;
  warmupSeconds: number;
  timeoutSeconds: number;
  sampleCpu?: () => Promise<CpuSample>;
}

export interface CopyRun {
  seconds: number;
  bytes: number;
  rows: number;
  cpu?: CpuSample;
}

export interface ExportTiming {
  compression: Compression;
  /** POST → `success` seen (the row polled every 100 ms; the worker's loop looks for work every 1 s) */
  seconds: number;
  /** the worker's own clock: claim (started_at) → completed_at */
  workerSeconds: number;
  rows: number;
  /** the file as stored (gzip'd when asked) */
  bytes: number;
  /** the file's text once gunzip'd */
  csvBytes: number;
  workerPeakRssMb: number;
  cpu?: CpuSample;
  /** seconds reading and checking the downloaded file (not timed) */
  verifySeconds: number;
}

export interface LoadSpan extends Figures {
  name: string;
  seconds: number;
  /** the span in windows of SERIES_SECONDS by send time, each beside what the machine did then */
  series: SeriesWindow[];
}

export interface ExportRun {
  accountId: string;
  contacts: number;
  columns: string[];
  copies: CopyRun[];
  /** the mean of the COPYs before and after the exports alone */
  copySeconds: number;
  alone: ExportTiming[];
  /** idle before the first export, between each two and after the last: one more than the exports */
  idles: LoadSpan[];
  /** the lowest idle p99 of the run, shown beside each export's own reference */
  idleP99: number;
  copyLoaded: { copy: CopyRun; load: LoadSpan };
  /** each export under load, with `reference`: the mean p99 of the idle spans before and after it */
  loaded: { export: ExportTiming; load: LoadSpan; reference: number }[];
  samples: number;
  connections: number;
  minRequests: number;
}

/** A contact as GET /v1/contacts/{md5} answers. */
interface ContactBody {
  email: string;
  attributes: Record<string, unknown>;
  brandIds: string[];
}

export async function runExportStep(
  ctx: Ctx,
  runId: string,
  account: BenchAccount,
  opts: ExportOptions,
  log: (m: string) => void,
): Promise<ExportRun> {
  const [{ n: contacts } = { n: 0 }] = await ctx.sql<{ n: number }[]>`
    select count(*)::int as n from contacts where account_id = ${account.id}`;
  if (contacts === 0) throw new Error('export: the account has no contacts (the step needs import A before it)');
  const columns = await defaultColumns(ctx.sql, account.id, undefined);
  const { statement } = await exportStatement(ctx.sql, account.id, columns, { brandIds: null, enabled: null });
  const types = new Map((await getSchema(ctx.sql, account.id)).map((a) => [a.name, a.type]));
  const sample = await sampleContacts(ctx, account, SAMPLES);
  const store = await createStore(opts.config);
  const copy = async (label: string) => {
    const c = await timedCopy(ctx.sql, statement, opts.sampleCpu);
    if (c.rows !== contacts)
      throw new VerificationError(`export: the ${label} COPY gave ${c.rows} rows, not ${contacts}`);
    log(
      `[export] ${label} COPY: ${fmtInt(c.rows)} rows, ${(c.bytes / 1e6).toFixed(1)} MB in ${c.seconds.toFixed(2)} s`,
    );
    return c;
  };
  const exportOnce = async (compression: Compression, label: string) => {
    const t = await timedExport(ctx, account, compression, opts);
    const view = await getExport(ctx, account, t.id);
    if (view.status !== 'success' || view.rowCount !== contacts)
      throw new VerificationError(`export ${label}: ${JSON.stringify(view)}, expected ${contacts} rows`);
    const v0 = performance.now();
    const file = await checkFile(view.downloadUrl!, compression, columns, types, sample, contacts, label);
    const verifySeconds = (performance.now() - v0) / 1000;
    await removeFile(ctx.sql, store, account.id, t.id);
    const timing: ExportTiming = { compression, ...t.timing, rows: contacts, ...file, verifySeconds };
    log(
      `[export] ${label}: ${timing.seconds.toFixed(2)} s (worker ${timing.workerSeconds.toFixed(2)} s), ` +
        `${(file.bytes / 1e6).toFixed(1)} MB, peak RSS ${timing.workerPeakRssMb} MB; ` +
        `verified in ${verifySeconds.toFixed(1)} s`,
    );
    return timing;
  };

  const copies = [await copy('first')];
  const alone: ExportTiming[] = [];
  for (const c of COMPRESSIONS) alone.push(await exportOnce(c, `${c} (alone)`));
  copies.push(await copy('second'));
  const copySeconds = copies.reduce((s, c) => s + c.seconds, 0) / copies.length;

  // Another account's GETs: idle, then through a bare COPY and through each export.
  const other = await createBenchAccount(ctx.sql, `${runId} export load`);
  const pool = await contactPool(ctx.sql, other, 0);
  const target: HttpTarget = { name: 'api', baseUrl: ctx.baseUrl, headers: { authorization: `Bearer ${other.key}` } };
  await preflight(target, 'GET', pool, `export-${runId}`);
  const during = async (name: string, work: () => Promise<void>) => {
    const span = await loadDuring(ctx, target, pool, name, work, opts.sampleCpu);
    if (span.seconds > SERIES_SECONDS * 2) logSeries(span, log);
    return span;
  };
  if (opts.warmupSeconds > 0) await during('warmup', () => Bun.sleep(opts.warmupSeconds * 1000));
  let copied: CopyRun | undefined;
  const copyLoad = await during('COPY', async () => void (copied = await copy('loaded')));
  const idleSpan = (k: number) => {
    log(`[export] another account's GETs, ${CONNECTIONS} connections: idle ${opts.seconds} s`);
    return during(k === 0 ? 'idle' : `idle ${k}`, () => Bun.sleep(opts.seconds * 1000));
  };
  const idles = [await idleSpan(0)];
  const loaded: { export: ExportTiming; load: LoadSpan }[] = [];
  for (const c of COMPRESSIONS) {
    let started: { id: string; timing: Timing } | undefined;
    const span = await during(`export ${c}`, async () => {
      started = await timedExport(ctx, account, c, opts);
    });
    // The idle span after it runs before the file is read: the load goes on from the export without a pause.
    idles.push(await idleSpan(idles.length));
    const id = started!.id;
    const view = await getExport(ctx, account, id);
    if (view.status !== 'success' || view.rowCount !== contacts)
      throw new VerificationError(`export ${c} (loaded): ${JSON.stringify(view)}, expected ${contacts} rows`);
    const v0 = performance.now();
    const file = await checkFile(view.downloadUrl!, c, columns, types, sample, contacts, `${c} (loaded)`);
    await removeFile(ctx.sql, store, account.id, id);
    const verifySeconds = (performance.now() - v0) / 1000;
    const timing: ExportTiming = { compression: c, ...started!.timing, rows: contacts, ...file, verifySeconds };
    const [before, after] = idles.slice(-2).map((i) => fix(i.p99, 1));
    log(
      `[export] ${c} under load: ${timing.seconds.toFixed(2)} s, GET p99 ${fix(span.p99, 1)} ms ` +
        `(idle before ${before} ms, after ${after} ms), peak RSS ${timing.workerPeakRssMb} MB`,
    );
    loaded.push({ export: timing, load: span });
  }
  const idleP99 = Math.min(...idles.map((i) => i.p99 ?? Infinity));
  return {
    accountId: account.id,
    contacts,
    columns,
    copies,
    copySeconds,
    alone,
    idles,
    idleP99,
    copyLoaded: { copy: copied!, load: copyLoad },
    loaded: loaded.map((l, k) => ({ ...l, reference: bracketP99(idles[k]!, idles[k + 1]!) })),
    samples: sample.size,
    connections: CONNECTIONS,
    minRequests: MIN_REQUESTS,
  };
}

/** The statement drained by this process: bytes counted, nothing kept. */
async function timedCopy(sql: Sql, statement: string, sampleCpu?: () => Promise<CpuSample>): Promise<CopyRun> {
  const before = await sampleCpu?.();
  const t0 = performance.now();
  const stream = (await sql.unsafe(statement).readable()) as unknown as Readable;
  let bytes = 0;
  let rows = 0;
  // One CopyData message a row (copy-rows.ts counts rows the same way); 'data' events, the cheapest drain.
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      rows++;
    });
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  const seconds = (performance.now() - t0) / 1000;
  const after = await sampleCpu?.();
  return { seconds, bytes, rows, ...(before && after && { cpu: cpuDelta(before, after) }) };
}

type Timing = Omit<ExportTiming, 'compression' | 'rows' | 'bytes' | 'csvBytes' | 'verifySeconds'>;

/** POST, then the row polled every 100 ms until success; the worker's RSS sampled meanwhile. */
async function timedExport(
  ctx: Ctx,
  account: BenchAccount,
  compression: Compression,
  opts: ExportOptions,
): Promise<{ id: string; timing: Timing }> {
  const reset = await resetPeakRss(ctx.workerPid);
  let sampledKb = (await procKb(ctx.workerPid, 'VmRSS')) ?? 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      sampledKb = Math.max(sampledKb, (await procKb(ctx.workerPid, 'VmRSS')) ?? 0);
      await Bun.sleep(100);
    }
  })();
  const before = await opts.sampleCpu?.();
  const t0 = performance.now();
  const res = await fetch(`${ctx.baseUrl}/v1/contact-exports`, {
    method: 'POST',
    headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ compression }),
  });
  const created = (await res.json()) as { id?: string };
  if (res.status !== 202 || !created.id)
    throw new Error(`export: POST /v1/contact-exports answered ${res.status} ${JSON.stringify(created)}`);
  let row: { status: string; worker_seconds: number | null } | undefined;
  try {
    for (;;) {
      [row] = await ctx.sql<{ status: string; worker_seconds: number | null }[]>`
        select status, extract(epoch from completed_at - started_at)::float8 as worker_seconds
        from contact_exports where account_id = ${account.id} and id = ${created.id}`;
      if (row?.status === 'success' || row?.status === 'failed') break;
      if (performance.now() - t0 > opts.timeoutSeconds * 1000)
        throw new Error(`export ${created.id}: not done after ${opts.timeoutSeconds} s`);
      await Bun.sleep(100);
    }
  } finally {
    sampling = false;
    await sampler;
  }
  const seconds = (performance.now() - t0) / 1000;
  const after = await opts.sampleCpu?.();
  if (row.status !== 'success') {
    const view = await getExport(ctx, account, created.id);
    throw new Error(`export ${created.id} failed: ${view.failureReason}`);
  }
  const hwm = reset ? await procKb(ctx.workerPid, 'VmHWM') : undefined;
  return {
    id: created.id,
    timing: {
      seconds,
      workerSeconds: row.worker_seconds ?? Number.NaN,
      workerPeakRssMb: Math.round(Math.max(hwm ?? 0, sampledKb) / 1024),
      ...(before && after && { cpu: cpuDelta(before, after) }),
    },
  };
}

interface ExportView {
  status: string;
  rowCount?: number;
  downloadUrl?: string;
  failureReason?: string;
}

async function getExport(ctx: Ctx, account: BenchAccount, id: string): Promise<ExportView> {
  const res = await fetch(`${ctx.baseUrl}/v1/contact-exports/${id}`, {
    headers: { authorization: `Bearer ${account.key}` },
  });
  if (res.status !== 200) throw new Error(`export: GET /v1/contact-exports/${id} answered ${res.status}`);
  return (await res.json()) as ExportView;
}

/** The file goes as the retention sweep removes it: due now, then worker/exports/expire.ts. */
async function removeFile(sql: Sql, store: Awaited<ReturnType<typeof createStore>>, accountId: string, id: string) {
  await sql`update contact_exports set file_expires_at = now() where account_id = ${accountId} and id = ${id}`;
  await removeExpiredExports(sql, store);
}

/**
 * `count` contacts of the account, spread over its keys (an index probe at a random md5 each), as
 * GET /v1/contacts/{md5} answers them, by their stored address: the file's Email cell.
 */
async function sampleContacts(ctx: Ctx, account: BenchAccount, count: number): Promise<Map<string, ContactBody>> {
  const out = new Map<string, ContactBody>();
  for (let tries = 0; out.size < count && tries < count * 5; tries++) {
    const [r] = await ctx.sql<{ md5: string }[]>`
      select replace(email_md5::text, '-', '') as md5 from contacts
      where account_id = ${account.id} and email_md5 >= ${crypto.randomUUID()}::uuid
      order by email_md5 limit 1`;
    if (!r) continue;
    const res = await fetch(`${ctx.baseUrl}/v1/contacts/${r.md5}`, {
      headers: { authorization: `Bearer ${account.key}` },
    });
    if (res.status !== 200) throw new Error(`export: GET /v1/contacts/${r.md5} answered ${res.status}`);
    const body = (await res.json()) as ContactBody;
    out.set(body.email, body);
  }
  if (out.size < Math.min(count, 10)) throw new Error(`export: only ${out.size} contacts sampled`);
  return out;
}

/**
 * Downloads the file and reads it as the importer would: the header, every row's cell count, the
 * data rows counted, and each sampled contact found once with every cell equal to the API's value.
 */
async function checkFile(
  url: string,
  compression: Compression,
  columns: readonly string[],
  types: ReadonlyMap<string, string>,
  sample: ReadonlyMap<string, ContactBody>,
  contacts: number,
  label: string,
): Promise<{ bytes: number; csvBytes: number }> {
  const res = await fetch(url);
  if (res.status !== 200 || !res.body) throw new VerificationError(`export ${label}: download answered ${res.status}`);
  let bytes = 0;
  let csvBytes = 0;
  async function* stored() {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      bytes += chunk.byteLength;
      yield chunk;
    }
  }
  let source: AsyncIterable<Uint8Array> = NodeReadable.from(stored(), { objectMode: false });
  if (compression === 'gzip') {
    const gunzip = createGunzip();
    pipeline(source as NodeReadable, gunzip, () => {});
    source = gunzip;
  }
  async function* text() {
    for await (const chunk of source) {
      csvBytes += chunk.byteLength;
      yield chunk;
    }
  }
  const fail = (what: string) => new VerificationError(`export ${label}: ${what}`);
  const emailAt = columns.indexOf('Email');
  const wantHeader = headerLine(columns.map((name) => ({ name, type: 'string' }))).trimEnd();
  let header: string[] | undefined;
  let rows = 0;
  const found = new Set<string>();
  await parseCsv(utf8Text(text()), (chunk, flagged) => {
    if (flagged?.size) throw fail(`papaparse flagged ${flagged.size} row(s) near data row ${rows}`);
    for (const cells of chunk) {
      if (!header) {
        header = cells;
        if (cells.join(',') !== wantHeader) throw fail(`header ${cells.join(',')}, expected ${wantHeader}`);
        continue;
      }
      if (cells.length === 1 && cells[0] === '') continue; // the text's final newline
      if (cells.length !== columns.length) throw fail(`data row ${rows + 1} has ${cells.length} cells`);
      rows++;
      const want = sample.get(cells[emailAt]!);
      if (!want) continue;
      if (found.has(want.email)) throw fail(`contact ${want.email} is in the file twice`);
      found.add(want.email);
      const diff = rowDiff(cells, columns, types, want);
      if (diff) throw fail(`the row of ${want.email} differs from GET /v1/contacts: ${diff}`);
    }
  });
  if (rows !== contacts) throw fail(`${rows} data rows, expected ${contacts}`);
  if (found.size !== sample.size) throw fail(`${sample.size - found.size} sampled contacts not in the file`);
  return { bytes, csvBytes };
}

/** Where a row differs from the API's contact, each cell read as the importer reads it; undefined when equal. */
function rowDiff(
  cells: readonly string[],
  columns: readonly string[],
  types: ReadonlyMap<string, string>,
  want: ContactBody,
): string | undefined {
  for (const [i, name] of columns.entries()) {
    const cell = cells[i]!;
    if (name === 'Email') {
      if (cell !== want.email) return `Email ${JSON.stringify(cell)}`;
    } else if (name === 'Brand') {
      const ids = cell === '' ? [] : cell.split(';');
      if (ids.sort().join() !== [...want.brandIds].sort().join()) return `Brand ${JSON.stringify(cell)}`;
    } else {
      const read = readAttributeValue(types.get(name) as never, cell, name, 'cell');
      const got = 'value' in read ? JSON.stringify(read.value) : 'empty' in read ? undefined : `error ${read.error}`;
      const api = want.attributes[name] === undefined ? undefined : JSON.stringify(want.attributes[name]);
      if (got !== api) return `${name}: the file's ${JSON.stringify(cell)} reads as ${got}, the API has ${api}`;
    }
  }
  return undefined;
}

/**
 * Another account's GETs from just before `work` starts until it ends: the answers to requests sent
 * while it ran make the span, also cut into windows beside what the machine did (latency-series.ts).
 * Returns once the load has stopped and was checked (no error, no non-2xx).
 */
async function loadDuring(
  ctx: Ctx,
  target: HttpTarget,
  pool: readonly PoolContact[],
  name: string,
  work: () => Promise<void>,
  sampleCpu?: () => Promise<CpuSample>,
): Promise<LoadSpan> {
  const timeline = new PhaseTimeline('before', performance.now());
  const phases = new PhaseLoad(timeline);
  const instance = load(target, 'GET', pool, `export-${name}`, CONNECTIONS, 24 * 3600);
  const series = new LatencySeries(SERIES_SECONDS);
  instance.on('response', (_c, status, _b, ms) => {
    const now = performance.now();
    phases.response(now, ms, status);
    series.add(now - ms, ms);
  });
  instance.on('reqError', () => phases.error(performance.now()));
  // The load's connections open and settle first.
  await Bun.sleep(500);
  const start = performance.now();
  timeline.mark(name, start);
  series.begin(start);
  const pids = { api: ctx.apiPid, worker: ctx.workerPid };
  const system = new SystemSampler(ctx.sql, start, SERIES_SECONDS, pids, sampleCpu);
  let end: number;
  try {
    await work();
  } finally {
    end = performance.now();
    timeline.mark('after', end);
    instance.stop();
  }
  const seconds = timeline.seconds().get(name)!;
  const r: Result = await instance;
  const windows = series.windows(await system.stop());
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0)
    throw new VerificationError(
      `export load ${name}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts (${phases.faults()})`,
    );
  // Answers sent after the work ended belong to no window of the span.
  const within = windows.slice(0, Math.ceil((end - start) / (SERIES_SECONDS * 1000)));
  return { name, seconds, ...phases.figures([name], seconds), series: within };
}

/** A span's windows in one line, and its slowest windows with what the machine did in them. */
function logSeries(span: LoadSpan, log: (m: string) => void): void {
  log(`[export] ${span.name}: ${seriesSummary(span.series, span.p99 ?? NaN)}`);
  const drift = driftSummary(span.series, SERIES_SECONDS);
  if (drift) log(`[export]   ${drift}`);
  for (const w of worstWindows(span.series, WORST_LOGGED)) {
    const s = w.system;
    const sys = s
      ? `; checkpoint ${s.checkpointBuffers} buffers (${s.checkpoints} ended), bgwriter ${s.cleanBuffers}, ` +
        `backends ${s.backendBuffers}; autovacuum ${s.autovacuumSeconds} s ${s.autovacuumTables.join(',')}; ` +
        `RSS api ${s.apiRssMb ?? '-'} MB, worker ${s.workerRssMb ?? '-'} MB`
      : '';
    log(
      `[export]   at ${w.at} s: ${fmtInt(w.requests)} answers, p50 ${fix(w.p50, 1)} ms, p99 ${fix(w.p99, 1)} ms, ` +
        `max ${fix(w.max, 1)} ms${sys}`,
    );
  }
}

/** The step's table for the printed summary. */
export function exportTable(run: ExportRun): string {
  const x = (s: number) => fix(s / run.copySeconds, 2);
  const cpu = (c?: CpuSample) =>
    c
      ? Object.entries(c)
          .map(([k, v]) => `${k} ${v.toFixed(1)}`)
          .join(', ')
      : '-';
  const mb = (b: number) => fix(b / 1e6, 1);
  const head =
    `export: ${fmtInt(run.contacts)} contacts, columns ${run.columns.join(',')}; COPY baseline ` +
    `${run.copies.map((c) => fix(c.seconds, 2)).join(' s, ')} s (before and after the exports alone; mean ` +
    `${fix(run.copySeconds, 2)} s, ${mb(run.copies[0]!.bytes)} MB); each file verified (rows, header, ` +
    `${run.samples} contacts against GET /v1/contacts)`;
  const rows = [
    ...run.copies.map((c, k) => [
      `COPY ${k === 0 ? 'before' : 'after'}`,
      fix(c.seconds, 2),
      '-',
      x(c.seconds),
      '-',
      '-',
      mb(c.bytes),
      '-',
      cpu(c.cpu),
    ]),
    ...[...run.alone.map((e) => ({ e, how: 'alone' })), ...run.loaded.map((l) => ({ e: l.export, how: 'loaded' }))].map(
      ({ e, how }) => [
        `export ${e.compression} (${how})`,
        fix(e.seconds, 2),
        fix(e.workerSeconds, 2),
        x(e.seconds),
        how === 'alone' ? `<= ${EXPORT_TARGETS.xCopy}` : '-',
        fmtInt(e.rows / e.seconds),
        mb(e.bytes),
        String(e.workerPeakRssMb),
        cpu(e.cpu),
      ],
    ),
    [
      'COPY (loaded)',
      fix(run.copyLoaded.copy.seconds, 2),
      '-',
      x(run.copyLoaded.copy.seconds),
      '-',
      '-',
      mb(run.copyLoaded.copy.bytes),
      '-',
      cpu(run.copyLoaded.copy.cpu),
    ],
  ];
  const timings = table(
    ['run', 'seconds', 'worker s', 'x COPY', 'target', 'rows/s', 'MB', 'peak RSS MB', 'CPU s'],
    rows,
  );
  // In the order they ran: the bare COPY, then idle spans with the exports between them.
  const spans: { span: LoadSpan; reference?: number }[] = [
    { span: run.copyLoaded.load },
    ...run.idles.flatMap((span, k) => [
      { span },
      ...(run.loaded[k] ? [{ span: run.loaded[k].load, reference: run.loaded[k].reference }] : []),
    ]),
  ];
  const load = table(
    ['span', 'seconds', 'answers', 'req/s', 'p50 ms', 'p99 ms', 'idle p99 ms', 'x idle p99', 'target', 'x lowest idle'],
    spans.map(({ span: s, reference }) => {
      const judged = s.name.startsWith('export');
      return [
        s.name,
        fix(s.seconds, 1),
        fmtInt(s.requests),
        fmtInt(s.reqPerSec),
        fix(s.p50, 1),
        fix(s.p99, 1),
        reference === undefined ? '-' : fix(reference, 1),
        reference === undefined ? '-' : fix((s.p99 ?? NaN) / reference, 2),
        judged ? (s.requests < run.minRequests ? 'too few' : `<= ${EXPORT_TARGETS.p99XIdle}`) : '-',
        s.name.startsWith('idle') ? '-' : fix((s.p99 ?? NaN) / run.idleP99, 2),
      ];
    }),
  );
  const about =
    `another account's GET /v1/contacts/{md5}, ${run.connections} connections; each export against the mean ` +
    `p99 of the idle spans before and after it; x lowest idle: against the run's lowest idle p99 ` +
    `(${fix(run.idleP99, 1)} ms)`;
  return `${head}\n${timings}\n\n${about}\n${load}`;
}

export function exportTargets(run: ExportRun): Target[] {
  const peak = Math.max(...run.alone.map((e) => e.workerPeakRssMb), ...run.loaded.map((l) => l.export.workerPeakRssMb));
  return [
    ...run.alone.map((e) => ({
      name: `export ${e.compression}: over the COPY (${e.seconds.toFixed(2)} / ${run.copySeconds.toFixed(2)} s)`,
      value: `${(e.seconds / run.copySeconds).toFixed(2)} x`,
      target: `<= ${EXPORT_TARGETS.xCopy} x`,
      pass: e.seconds / run.copySeconds <= EXPORT_TARGETS.xCopy,
    })),
    {
      name: 'export: worker peak RSS',
      value: `${peak} MB`,
      target: `<= ${EXPORT_TARGETS.workerRssMb} MB`,
      pass: peak <= EXPORT_TARGETS.workerRssMb,
    },
    ...run.loaded.map(({ load: s, reference }) => {
      const ratio = (s.p99 ?? NaN) / reference;
      const judged = s.requests >= run.minRequests;
      return {
        name:
          `${s.name}: another account's GET p99 over idle, the mean of the idle spans around it ` +
          `(${fix(s.p99, 1)} / ${fix(reference, 1)} ms)`,
        value: `${fix(ratio, 2)} x`,
        target: `<= ${EXPORT_TARGETS.p99XIdle} x`,
        pass: !judged || ratio <= EXPORT_TARGETS.p99XIdle,
        ...(!judged && { judged: false }),
      };
    }),
  ];
}

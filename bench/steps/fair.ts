/**
 * Step `fair`: how imports of different accounts share the worker. Account A imports file A; 10 s
 * after its upload ended, 20 other accounts each start a 10-row import (through the real flow:
 * POST, PUT to the upload link, GET polled every second). Reports the small imports' times from
 * their upload to `completedAt` (p50, p95, max) and A's time against A alone: file A imported just before and
 * just after (each into a fresh account too), since a later import of the same file on a fuller
 * database is slower by itself (14.3, 17.4 and 16.5 s for three in a row at 1M rows: more contacts,
 * the first import's checkpoint), so import A of the run is no fair baseline. Every import is
 * verified: each A like import A, each small one's counts and contacts exactly; each A's contacts are
 * then deleted (dropAccountContacts), so the three start from the same table.
 */
import type { Sql } from '../../src/db';
import { createBenchAccount, dropAccountContacts } from '../lib/account';
import type { FileMeta } from '../lib/generate';
import { runImportFlow, type ImportOptions, type ImportRun } from '../lib/import-flow';
import { SMALL_ROWS, smallFile, smallImport } from './small-import';
import type { Target } from '../lib/types';
import { checkImport } from '../lib/verify';

export const SMALL_ACCOUNTS = 20;
export const SMALL_DELAY_SECONDS = 10;
/** The targets for the small imports and for A's slowdown. */
export const FAIR_TARGETS = { p95Seconds: 5, maxSeconds: 10, slowdown: 0.05 };

export interface FairRun {
  a: ImportRun;
  /** file A alone, just before and just after the shared run */
  alone: [ImportRun, ImportRun];
  /** the mean of the two */
  aAloneSeconds: number;
  /** A's seconds / A alone's − 1 */
  slowdown: number;
  small: { seconds: number[]; p50: number; p95: number; max: number };
  /** whether A was still running when every small import had succeeded */
  aStillRunning: boolean;
}

type Ctx = { baseUrl: string; sql: Sql; workerPid: number };

export async function runFair(
  ctx: Ctx,
  runId: string,
  fileA: FileMeta,
  opts: ImportOptions & { samples: number },
  log: (m: string) => void,
): Promise<FairRun> {
  const before = await aloneRun(ctx, `${runId} fair alone 1`, fileA, opts);
  const big = await createBenchAccount(ctx.sql, `${runId} fair A`);
  const smallAccounts = await Promise.all(
    Array.from({ length: SMALL_ACCOUNTS }, (_, k) => createBenchAccount(ctx.sql, `${runId} fair ${k}`)),
  );
  const csv = smallFile();
  let aDone = false;
  const aRun = runImportFlow(ctx, big, fileA, 'fair A', opts);
  aRun.then(
    () => (aDone = true),
    () => (aDone = true),
  );
  // A's clock starts when its upload has ended: the import leaves awaiting-upload.
  while (!aDone && !(await uploaded(ctx.sql, big.id))) await Bun.sleep(50);
  await Bun.sleep(SMALL_DELAY_SECONDS * 1000);
  if (aDone) log(`[fair] warning: import A ended within ${SMALL_DELAY_SECONDS} s; use more --rows`);
  log(`[fair] ${SMALL_ACCOUNTS} accounts start a ${SMALL_ROWS}-row import`);
  const seconds = await Promise.all(smallAccounts.map((acc) => smallImport(ctx, acc, csv)));
  const aStillRunning = !aDone;
  const a = await aRun;
  await checkImport(ctx, big, fileA, a.view, { label: 'fair A', mode: 'added', variants: [0], samples: opts.samples });
  await dropAccountContacts(ctx.sql, big.id);
  const after = await aloneRun(ctx, `${runId} fair alone 2`, fileA, opts);
  const aAloneSeconds = (before.seconds + after.seconds) / 2;
  const sorted = [...seconds].sort((x, y) => x - y);
  const pick = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  const run: FairRun = {
    a,
    alone: [before, after],
    aAloneSeconds,
    slowdown: a.seconds / aAloneSeconds - 1,
    small: { seconds, p50: pick(0.5), p95: pick(0.95), max: sorted.at(-1)! },
    aStillRunning,
  };
  log(`[bench] fair verified: A ${a.seconds.toFixed(2)} s, small p95 ${run.small.p95.toFixed(2)} s`);
  return run;
}

/** File A into a fresh account with nothing else running, verified like import A. */
async function aloneRun(ctx: Ctx, label: string, fileA: FileMeta, opts: ImportOptions & { samples: number }) {
  const account = await createBenchAccount(ctx.sql, label);
  const run = await runImportFlow(ctx, account, fileA, label, opts);
  await checkImport(ctx, account, fileA, run.view, { label, mode: 'added', variants: [0], samples: opts.samples });
  await dropAccountContacts(ctx.sql, account.id);
  return run;
}

async function uploaded(sql: Sql, accountId: string): Promise<boolean> {
  const [row] = await sql<{ status: string }[]>`select status from contact_imports where account_id = ${accountId}`;
  return row !== undefined && row.status !== 'awaiting-upload';
}

/** The step's line for the printed summary. */
export function fairLine(run: FairRun): string {
  const s = (x: number) => `${x.toFixed(2)} s`;
  const [before, after] = run.alone;
  const alone =
    ` against ${s(run.aAloneSeconds)} alone (${s(before.seconds)} before, ${s(after.seconds)} after: ` +
    `${pct(run.slowdown)})`;
  return (
    `fair: ${SMALL_ACCOUNTS} accounts' ${SMALL_ROWS}-row imports started ${SMALL_DELAY_SECONDS} s into import A, ` +
    `upload to success p50 ${s(run.small.p50)}, p95 ${s(run.small.p95)}, max ${s(run.small.max)}; ` +
    `A ${s(run.a.seconds)}${alone}${run.aStillRunning ? '' : '; A had ended before the small imports did'}`
  );
}

export function fairTargets(run: FairRun): Target[] {
  const t = FAIR_TARGETS;
  return [
    {
      name: 'fair: small imports p95',
      value: `${run.small.p95.toFixed(2)} s`,
      target: `<= ${t.p95Seconds} s`,
      pass: run.small.p95 <= t.p95Seconds,
    },
    {
      name: 'fair: small imports max',
      value: `${run.small.max.toFixed(2)} s`,
      target: `<= ${t.maxSeconds} s`,
      pass: run.small.max <= t.maxSeconds,
    },
    {
      name: 'fair: import A slowed by the small imports',
      value: pct(run.slowdown),
      target: `<= ${pct(t.slowdown)}`,
      pass: run.slowdown <= t.slowdown,
    },
  ];
}

const pct = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)} %`;

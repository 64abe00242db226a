/**
 * Step `mixed`: what an import does to the API of other accounts on the same machine. GET, POST and
 * PATCH load on one account (autocannon, the three at once, 32 connections in all) first with no
 * import running (idle), then while import A of file A into another, fresh account merges: the load
 * starts when that import's phase turns `merge` and runs as long as the idle one. Targets: each
 * kind's p99 at most 2 × its idle p99, no errors, no non-2xx answers. Verified after timing: the
 * import's counts and contacts as import A's, and the end state the load's 2xx answers promise
 * (http.ts). The import's contacts are deleted after, so the step needs disk for one more set.
 *
 * The merge must outlast the load for the figure to be the merge's: the step reports how many of
 * the load's seconds fell inside it. At 25M rows the merge lasts minutes; at 1M a few seconds.
 */
import type { Sql } from '../src/db';
import { createBenchAccount, dropAccountContacts, type BenchAccount } from './account';
import type { FileMeta } from './generate';
import { load, preflight, verify, type HttpTarget, type PoolContact, type Scenario } from './http';
import { runImportFlow, type ImportOptions } from './import-flow';
import { contactPool } from './summary';
import { checkImport } from './verify';

/** Connections per kind: 32 in all, as the load. */
const CONNECTIONS: Record<Scenario, number> = { GET: 12, POST: 10, PATCH: 10 };
/** The target: an import leaves the other account's p99 at most this many times its idle p99. */
const P99_RATIO_TARGET = 2;

export interface MixedKind {
  scenario: Scenario;
  connections: number;
  reqPerSec: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

export interface MixedRun {
  seconds: number;
  idle: MixedKind[];
  merging: MixedKind[];
  /** of the load's seconds while importing, how many the import spent in its merge */
  mergeOverlapSeconds: number;
  importSeconds: number;
  /** each kind's p99 while merging over its idle p99, at most */
  p99RatioTarget: number;
}

interface Ctx {
  baseUrl: string;
  sql: Sql;
  workerPid: number;
}

export async function runMixed(
  ctx: Ctx,
  runId: string,
  file: FileMeta,
  opts: ImportOptions & { samples: number; seconds: number; warmupSeconds: number },
  log: (m: string) => void,
): Promise<MixedRun> {
  const loaded = await createBenchAccount(ctx.sql, `${runId} mixed load`);
  const pool = await contactPool(ctx.sql, loaded, 0);
  const target: HttpTarget = {
    name: 'api',
    baseUrl: ctx.baseUrl,
    headers: { authorization: `Bearer ${loaded.key}` },
  };
  for (const s of ['GET', 'POST', 'PATCH'] as const) await preflight(target, s, pool, `mixed-${runId}-c`);
  if (opts.warmupSeconds > 0) await loadAll(ctx.sql, loaded, target, pool, `mixed-${runId}-w`, opts.warmupSeconds);

  log(`[mixed] idle: GET, POST and PATCH at once, 32 connections, ${opts.seconds} s`);
  const { kinds: idle } = await loadAll(ctx.sql, loaded, target, pool, `mixed-${runId}-idle`, opts.seconds);

  const importer = await createBenchAccount(ctx.sql, `${runId} mixed import`);
  try {
    const importing = runImportFlow(ctx, importer, file, 'mixed import A', opts);
    importing.catch(() => {}); // awaited below; a failure must not go unhandled while the load runs
    const merging = await untilMerging(ctx.sql, importer.id, importing);
    log(`[mixed] import A merging: the same load for ${opts.seconds} s`);
    const started = performance.now();
    const { kinds: busy, loadEnded } = await loadAll(
      ctx.sql,
      loaded,
      target,
      pool,
      `mixed-${runId}-merge`,
      opts.seconds,
    );
    const mergeEnded = await merging.ended;
    const run = await importing;
    await checkImport(ctx, importer, file, run.view, {
      label: 'mixed import A',
      mode: 'added',
      variants: [0],
      samples: opts.samples,
    });
    const overlap = (Math.min(loadEnded, mergeEnded ?? loadEnded) - started) / 1000;
    log(`[mixed] import A verified; ${overlap.toFixed(1)} of the load's ${opts.seconds} s fell in its merge`);
    return {
      seconds: opts.seconds,
      idle,
      merging: busy,
      mergeOverlapSeconds: overlap,
      importSeconds: run.seconds,
      p99RatioTarget: P99_RATIO_TARGET,
    };
  } finally {
    await dropAccountContacts(ctx.sql, importer.id);
  }
}

/**
 * Resolves when the account's import is in its merge phase; `ended` then resolves when it leaves it
 * (or undefined when the import ended first).
 */
async function untilMerging(
  sql: Sql,
  accountId: string,
  importing: Promise<unknown>,
): Promise<{ ended: Promise<number | undefined> }> {
  let done = false;
  void importing.finally(() => (done = true)).catch(() => {});
  const phase = async () => {
    const [row] = await sql<{ status: string; phase: string | null; checkpoint: number; row_count: number | null }[]>`
      select status, phase, checkpoint, row_count from contact_imports where account_id = ${accountId}`;
    return row?.status === 'importing' && row.phase === 'merge' && (row.row_count ?? 0) > row.checkpoint;
  };
  while (!(await phase())) {
    if (done) {
      await importing; // throws the import's failure
      throw new Error('mixed: import A ended before its merge was seen');
    }
    await Bun.sleep(50);
  }
  const ended = (async () => {
    while (await phase()) await Bun.sleep(100);
    return performance.now();
  })();
  return { ended };
}

/** The three kinds at once; each checked for errors and verified against the database after. */
async function loadAll(
  sql: Sql,
  account: BenchAccount,
  target: HttpTarget,
  pool: readonly PoolContact[],
  tag: string,
  seconds: number,
): Promise<{ kinds: MixedKind[]; loadEnded: number }> {
  const kinds = ['GET', 'POST', 'PATCH'] as const;
  const results = await Promise.all(kinds.map((s) => load(target, s, pool, `${tag}-${s}`, CONNECTIONS[s], seconds)));
  // The load's end, before the end state is checked (the overlap with the merge is the load's own).
  const loadEnded = performance.now();
  const out: MixedKind[] = [];
  for (const [k, s] of kinds.entries()) {
    const r = results[k]!;
    if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0)
      throw new Error(
        `mixed ${tag} ${s}: ${r.non2xx} non-2xx answers (${JSON.stringify(r.statusCodeStats)}), ` +
          `${r.errors} errors, ${r.timeouts} timeouts`,
      );
    await verify(sql, account.id, s, `${tag}-${s}`, r['2xx'], pool, CONNECTIONS[s]);
    out.push({
      scenario: s,
      connections: CONNECTIONS[s],
      reqPerSec: r['2xx'] / r.duration,
      p50: r.latency.p50,
      p99: r.latency.p99,
      non2xx: r.non2xx,
      errors: r.errors + r.timeouts,
    });
  }
  return { kinds: out, loadEnded };
}

/**
 * `--citus`: import A, the HTTP step and the small imports again, after the single node's run, on the embedded Citus
 * cluster (a coordinator and `workers` workers under `$DATA_DIR/citus`, on this machine), verified
 * as on the single node. Each node's CPU time is sampled around every timed run, so the figures say
 * what the coordinator and each worker do per row and per request: the scale model's inputs
 * (bench/findings/2026-11-29-scale-out-model.md). The cluster is started from an empty database and stopped at the end.
 */
import { createBenchAccount } from '../lib/account';
import { checkDiskSpace } from '../lib/disk';
import type { FileMeta } from '../lib/generate';
import type { HttpOptions } from './http';
import type { ImportOptions, ImportRun } from '../lib/import-flow';
import type { HttpRow } from '../lib/types';
import { once, startInfra, startService } from '../lib/services';
import type { ShapeRun } from './shape-steps';
import { runSmall, type SmallRun } from './small-import';
import { cpuSampler, httpStep, importA } from './import-and-http';
import { contactStorage, type ContactStorage } from '../lib/storage';
import type { Sql } from '../../src/db';
import { citusWorkerUrls } from '../../src/embedded/citus';
import { LAYOUT } from '../../worker/import/staging-pool';

export interface DatabaseRun {
  /** `single node`, or `citus 1+2` (the coordinator and 2 workers) */
  label: string;
  /** the wide file A's import, which the cluster runs again */
  importA?: ImportRun;
  /** each file shape's dba step and imports (the single node only), for the CPU table */
  shapes?: ShapeRun[];
  http: HttpRow[];
  /** the contacts after import A */
  storage?: ContactStorage;
  /** step `small` (small-import.ts): imports of a few rows, each alone */
  small?: SmallRun;
  /** on a cluster, the worker that holds the bench account's shards (`worker-2`) */
  accountNode?: string;
}

/** Every node's WAL between checkpoints: max_wal_size of the embedded cluster's nodes (src/embedded/citus.ts). */
const NODE_WAL_BYTES = 4e9;

export async function runOnCitus(
  opts: {
    workers: number;
    runId: string;
    fileA: FileMeta;
    steps: { a: boolean; http: boolean; small: boolean };
    importOpts: Omit<ImportOptions, 'strategy'> & { samples: number };
    httpOpts: HttpOptions;
  },
  log: (m: string) => void,
  /** registers a stop that also runs when the bench is interrupted (index.ts's stack) */
  onStop: (stop: () => Promise<void>) => void,
): Promise<DatabaseRun> {
  const label = `citus 1+${opts.workers}`;
  log(`[bench] ${label}: the embedded cluster, a coordinator and ${opts.workers} workers`);
  const infra = await startInfra(log, { citusWorkers: opts.workers });
  // Its database is the bench's own and holds a full import's contacts: dropped, like the single
  // node's before it, so the next run's disk check finds the space free.
  const stopInfra = once(() => infra.stop({ drop: true }));
  onStop(stopInfra);
  try {
    await checkDiskSpace(
      {
        dataDir: infra.config.dataDir,
        rows: opts.fileA.rows,
        files: [],
        importA: opts.steps.a,
        importB: false,
        walBytes: (opts.workers + 1) * NODE_WAL_BYTES,
      },
      log,
    );
    const service = await startService(infra);
    const stopService = once(() => service.stop());
    onStop(stopService);
    try {
      // A new cluster's worker makes its staging pool first (worker/import/staging-pool.ts): once
      // per cluster, not per import, so the imports are timed with it made; its time is printed.
      await stagingPoolMade(infra.sql, infra.config.workerConcurrency, label, log);
      const account = await createBenchAccount(infra.sql, `${opts.runId} ${label}`);
      const ctx = { baseUrl: service.baseUrl, sql: infra.sql, workerPid: service.worker.proc.pid };
      const sampleCpu = await cpuSampler(infra, service);
      const run: DatabaseRun = { label, http: [] };
      if (opts.steps.a) {
        run.importA = await importA(ctx, account, opts.fileA, { ...opts.importOpts, sampleCpu }, log);
        run.storage = await contactStorage(infra.sql);
      }
      if (opts.steps.small) run.small = await runSmall(ctx, `${opts.runId} ${label}`, log);
      if (opts.steps.http) {
        const rows = opts.steps.a ? opts.fileA.rows : 0;
        // Beside the API on the coordinator, one connected to each worker (docs/scaling-out.md):
        // on the account's, its statements run where its shards are; on another, they pass through it.
        const workers = await citusWorkerUrls(infra.databaseUrl);
        const nodeApis = workers.map((databaseUrl, k) => ({ name: `api-on-worker-${k + 1}` as const, databaseUrl }));
        run.accountNode = await accountNode(infra.sql, account.id, workers);
        log(`[bench] ${label}: the bench account's shards are on ${run.accountNode}`);
        const httpOpts = { ...opts.httpOpts, sampleCpu };
        run.http = await httpStep(infra, service, account, rows, httpOpts, opts.runId, log, nodeApis);
      }
      return run;
    } finally {
      await stopService();
    }
  } finally {
    await stopInfra();
  }
}

/** Waits until the worker's upkeep has made `keep` staging sets of this layout (10 minutes at most). */
async function stagingPoolMade(sql: Sql, keep: number, label: string, log: (m: string) => void): Promise<void> {
  const started = performance.now();
  for (;;) {
    const [{ ready } = { ready: 0 }] = await sql<{ ready: number }[]>`
      select count(*)::int as ready from staging_sets where ready and layout = ${LAYOUT}`;
    const seconds = (performance.now() - started) / 1000;
    if (ready >= keep) return log(`[bench] ${label}: the staging pool's ${keep} sets made in ${seconds.toFixed(1)} s`);
    if (seconds > 600) throw new Error(`${label}: the worker made ${ready} of ${keep} staging sets in 10 minutes`);
    await Bun.sleep(250);
  }
}

/** `worker-k`: the worker of `workers` (citusWorkerUrls' order) holding the account's contacts shard. */
async function accountNode(sql: Sql, accountId: string, workers: string[]): Promise<string> {
  const [row] = await sql<{ port: number }[]>`
    select n.nodeport as port from pg_dist_placement p join pg_dist_node n using (groupid)
    where p.shardid = get_shard_id_for_distribution_column('contacts', ${accountId}::uuid) and n.noderole = 'primary'`;
  const k = workers.findIndex((u) => new URL(u).port === String(row?.port));
  if (k < 0) throw new Error(`the account's contacts shard is on no worker of ${workers.join(', ')}`);
  return `worker-${k + 1}`;
}

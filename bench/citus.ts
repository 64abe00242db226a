/**
 * `--citus`: import A, the HTTP step and the small imports again, after the single node's run, on the embedded Citus
 * cluster (a coordinator and `workers` workers under `$DATA_DIR/citus`, on this machine), verified
 * as on the single node. Each node's CPU time is sampled around every timed run, so the figures say
 * what the coordinator and each worker do per row and per request: the scale model's inputs
 * (bench/README.md). The cluster is started from an empty database and stopped at the end.
 */
import { createBenchAccount } from './account';
import { checkDiskSpace } from './disk';
import type { FileMeta } from './generate';
import type { HttpOptions } from './http';
import type { ImportOptions, ImportRun } from './import-flow';
import type { HttpRow } from './report';
import { once, startInfra, startService } from './services';
import type { ShapeRun } from './shape-steps';
import { runSmall, type SmallRun } from './small-import';
import { cpuSampler, httpStep, importA } from './steps';
import { contactStorage, type ContactStorage } from './storage';

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
        run.http = await httpStep(infra, service, account, rows, { ...opts.httpOpts, sampleCpu }, opts.runId, log);
      }
      return run;
    } finally {
      await stopService();
    }
  } finally {
    await stopInfra();
  }
}

/**
 * Import A and the HTTP step as the bench runs them on any database: the single node of the main run
 * and, with `--citus`, the embedded cluster after it (bench/steps/citus.ts); import B on the single node.
 * Each is timed, then verified; with a CPU sampler each also says what its rows or requests cost
 * each process. An import's label names its file's shape (`import A (narrow)`).
 */
import type { BenchAccount } from '../lib/account';
import { databaseProbes, sampleCpu, type CpuSample } from '../lib/cpu';
import type { FileMeta } from '../lib/generate';
import { runHttp, type HttpOptions } from './http';
import { runImportFlow, type ImportOptions, type ImportRun } from '../lib/import-flow';
import type { HttpRow } from '../lib/types';
import { stopChild, type Infra, type Service } from '../lib/services';
import { shapeOf } from '../lib/shapes';
import { startBaseline } from '../lib/baseline';
import { startProcessGroups, type ProcessGroups } from '../lib/process-groups';
import { checkImport } from '../lib/verify';

export interface StepContext {
  baseUrl: string;
  sql: Infra['sql'];
  workerPid: number;
}

/** Import A of file A through the real flow into `account`, then its counts, total and sampled contacts. */
export async function importA(
  ctx: StepContext,
  account: BenchAccount,
  fileA: FileMeta,
  opts: Omit<ImportOptions, 'strategy'> & { samples: number; label?: string },
  log: (m: string) => void,
): Promise<ImportRun> {
  const label = opts.label ?? shapeOf(fileA).label('import A');
  const run = await runImportFlow(ctx, account, fileA, label, { ...opts, strategy: 'overwrite' });
  await checkImport(ctx, account, fileA, run.view, {
    label,
    mode: 'added',
    variants: [0],
    samples: opts.samples,
  });
  log(`[bench] ${label} verified: ${JSON.stringify(run.view)}`);
  return run;
}

/** Import B of file B (`overwrite`) over import A's contacts in `account`: every row an update, verified so. */
export async function importB(
  ctx: StepContext,
  account: BenchAccount,
  fileB: FileMeta,
  opts: Omit<ImportOptions, 'strategy'> & { samples: number; label?: string },
  log: (m: string) => void,
): Promise<ImportRun> {
  const label = opts.label ?? shapeOf(fileB).label('import B');
  const run = await runImportFlow(ctx, account, fileB, label, { ...opts, strategy: 'overwrite' });
  await checkImport(ctx, account, fileB, run.view, {
    label,
    mode: 'updated',
    variants: [0, 1],
    samples: opts.samples,
  });
  log(`[bench] ${label} verified: ${JSON.stringify(run.view)}`);
  return run;
}

/**
 * GET, POST and PATCH against the baseline server and the API on the same database (`importedRows`:
 * the contacts import A gave the account, 0 when it did not run), and with `opts.noLimits` the API
 * without rate limits (a second API process, RATE_LIMITS=false), each run's end state checked. The
 * two APIs in one run: what the limits cost is their difference, under the same load on the machine.
 */
export async function httpStep(
  infra: Infra,
  service: Service,
  account: BenchAccount,
  importedRows: number,
  opts: HttpOptions,
  runId: string,
  log: (m: string) => void,
  /** More APIs measured beside the service's, each its own process on its own database URL (bench/steps/citus.ts). */
  nodeApis: { name: `api-on-${string}`; databaseUrl: string }[] = [],
): Promise<HttpRow[]> {
  const baseline = await startBaseline(infra, account);
  const onNodes: Awaited<ReturnType<Service['startApi']>>[] = [];
  const headers = { authorization: `Bearer ${account.key}` };
  // The API and the bare server as N processes too (API_PROCESSES), each against the other.
  let groups: ProcessGroups | undefined;
  let unlimited: Awaited<ReturnType<Service['startApi']>> | undefined;
  const stopAll = () =>
    Promise.all([baseline.stop(), groups?.stop(), ...[unlimited, ...onNodes].map((a) => a && stopChild(a.child))]);
  try {
    if (opts.noLimits) unlimited = await service.startApi('api-no-limits', { RATE_LIMITS: 'false' });
    for (const n of nodeApis) onNodes.push(await service.startApi(n.name, { DATABASE_URL: n.databaseUrl }));
    const processes = opts.apiProcesses ?? 1;
    if (processes > 1) groups = await startProcessGroups(infra, account, processes, headers);
  } catch (e) {
    await stopAll();
    throw e;
  }
  try {
    const pool = await baseline.pool(importedRows);
    const api = { name: 'api' as const, baseUrl: service.baseUrl, headers };
    const noLimits = unlimited && { name: 'api-no-limits' as const, baseUrl: unlimited.baseUrl, headers };
    const nodeTargets = onNodes.map((o, k) => ({ name: nodeApis[k]!.name, baseUrl: o.baseUrl, headers }));
    // The baseline server's own CPU beside the service's processes: what a request costs each side whole.
    const probes = [
      { name: 'baseline', pid: baseline.pid },
      ...(unlimited ? [{ name: 'api-no-limits', pid: unlimited.child.proc.pid }] : []),
      ...onNodes.map((o, k) => ({ name: nodeApis[k]!.name, pid: o.child.proc.pid })),
      ...(groups?.probes ?? []),
    ];
    const withBaseline =
      opts.sampleCpu && (async () => ({ ...(await opts.sampleCpu!()), ...(await sampleCpu(probes)) }));
    const httpOpts = { ...opts, sampleCpu: withBaseline };
    const targets = {
      api,
      baseline: baseline.target,
      noLimits,
      others: [...nodeTargets, ...(groups?.targets ?? [])],
    };
    return await runHttp(targets, pool, infra.sql, account.id, httpOpts, runId, log);
  } finally {
    await stopAll();
  }
}

/**
 * CPU seconds of the database's servers (`postgres`, or `coordinator`, `worker-1` …), the API
 * (`api`) and the worker (`importer`, the one running when sampled: a restart replaces it).
 */
export async function cpuSampler(infra: Infra, service: Service): Promise<() => Promise<CpuSample>> {
  const db = await databaseProbes(infra.databaseUrl);
  return () =>
    sampleCpu([...db, { name: 'api', pid: service.api.proc.pid }, { name: 'importer', pid: service.worker.proc.pid }]);
}

/**
 * CPU time per process tree (a PostgreSQL server with its backends, the API, the worker), sampled
 * before and after a step, so the bench can say what a row or a request costs each node: the inputs
 * of the scale model in bench/findings/2026-11-29-scale-out-model.md. Linux /proc only; elsewhere (or
 * for a server on another machine) a probe is left out rather than guessed.
 */
import { readdir, readFile } from 'node:fs/promises';
import postgres from 'postgres';
import { citusWorkerUrls } from '../../src/embedded/citus';

export interface CpuProbe {
  name: string;
  pid: number;
}
/** CPU seconds (user + system) by probe name. */
export type CpuSample = Record<string, number>;

export const TICKS = Number(Bun.spawnSync(['getconf', 'CLK_TCK']).stdout.toString().trim()) || 100;

/** pid, ppid and the CPU ticks of a process and of its children it has waited for. */
async function stat(pid: number): Promise<{ ppid: number; ticks: number } | undefined> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (!text) return undefined;
  // Fields after the command name (which may hold spaces): state ppid … utime(14) stime cutime cstime.
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]) };
}

/**
 * Each probe's CPU seconds: its process, its live children and the children that already exited
 * (PostgreSQL's backends of closed connections are counted by the postmaster when it reaps them).
 */
export async function sampleCpu(probes: readonly CpuProbe[]): Promise<CpuSample> {
  const pids = (await readdir('/proc')).filter((d) => /^\d+$/.test(d)).map(Number);
  const stats = await Promise.all(pids.map(async (pid) => ({ pid, s: await stat(pid) })));
  const out: CpuSample = {};
  for (const p of probes) {
    let ticks = 0;
    for (const { pid, s } of stats) if (s && (pid === p.pid || s.ppid === p.pid)) ticks += s.ticks;
    out[p.name] = ticks / TICKS;
  }
  return out;
}

export const cpuDelta = (before: CpuSample, after: CpuSample): CpuSample =>
  Object.fromEntries(Object.keys(after).map((k) => [k, after[k]! - (before[k] ?? 0)]));

/** The postmaster behind a connection: the parent of its backend, when the server runs on this machine. */
async function postmasterPid(url: string): Promise<number | undefined> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [{ pid }] = (await sql`select pg_backend_pid() as pid`) as unknown as [{ pid: number }];
    return (await stat(pid))?.ppid;
  } catch {
    return undefined;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * The database's servers: `postgres` for one PostgreSQL, or `coordinator` and `worker-1` … in port
 * order for a Citus cluster (its workers reached with the coordinator's URL and their own port).
 * Servers on another machine are left out.
 */
export async function databaseProbes(url: string): Promise<CpuProbe[]> {
  const workers = await citusWorkerUrls(url);
  const probes: CpuProbe[] = [];
  const add = async (name: string, nodeUrl: string) => {
    const pid = await postmasterPid(nodeUrl);
    if (pid) probes.push({ name, pid });
  };
  await add(workers.length ? 'coordinator' : 'postgres', url);
  for (const [k, worker] of workers.entries()) await add(`worker-${k + 1}`, worker);
  return probes;
}

/**
 * Brings up what the benchmark measures, the way `src/cli/start.ts` does: PostgreSQL and Redis from
 * DATABASE_URL / REDIS_URL or the embedded defaults (under DATA_DIR, `.data/bench` unless set),
 * migrations, then the API and the worker as child processes on a free port. Children log to files
 * under `$DATA_DIR/logs`, so their output costs what it costs in production without flooding the table.
 */
import { closeSync, existsSync, openSync } from 'node:fs';
import { mkdir, readdir, readFile, readlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { loadConfig, type Config } from '../../src/config';
import { connect, type Sql } from '../../src/db';
import { migrate } from '../../src/migrate';
import { freePort } from '../../src/embedded';
import { aptInstall } from '../../src/embedded/ports';
import { citusWorkerUrls, formCluster, VENDORED_CITUS_SRC } from '../../src/embedded/citus';
import { resolveDatabaseUrl, resolveRedisUrl, type Resolved } from '../../src/embedded/urls';

export interface Infra {
  config: Config;
  databaseUrl: string;
  redisUrl: string;
  /** the bench's own pool: setup, L1, phase sampling and checks */
  sql: Sql;
  logDir: string;
  /** Stops what startInfra started; with `drop`, the embedded database is dropped first (its disk given back). */
  stop(opts?: { drop?: boolean }): Promise<void>;
  /**
   * A second database on the embedded single node, migrated like the first, for a step whose data
   * must not stay (the dba step): dropped by `drop`, which gives its disk back at once. Undefined
   * on a configured database (the bench creates no databases there) and on a cluster.
   */
  scratch?: (suffix: string) => Promise<ScratchDatabase>;
}

export interface ScratchDatabase {
  /** for a client of its own (pgloader) */
  url: string;
  sql: Sql;
  drop(): Promise<void>;
}

/**
 * `env` on top of the process's environment; `{ citusWorkers: N }` ignores DATABASE_URL and brings up
 * the embedded Citus cluster instead (a coordinator and N workers under `$DATA_DIR/citus`), Citus built
 * from CITUS_SRC or the vendored source when PostgreSQL lacks it.
 */
export async function startInfra(log: (m: string) => void, opts: { citusWorkers?: number } = {}): Promise<Infra> {
  const env: Record<string, string | undefined> = {
    ...process.env,
    DATA_DIR: process.env.DATA_DIR ?? resolve('.data/bench'),
  };
  if (opts.citusWorkers) {
    delete env.DATABASE_URL;
    env.CITUS_WORKERS = String(opts.citusWorkers);
    env.CITUS_SRC ??= VENDORED_CITUS_SRC;
  }
  const config = loadConfig(env);
  const say = (m: string) => log(`[services] ${m}`);
  const started: Resolved[] = [];
  try {
    const db = await resolveDatabaseUrl(config, say);
    started.push(db);
    const redis = await resolveRedisUrl(config, say);
    started.push(redis);
    // The embedded cluster is the bench's own: every run starts from an empty database, so figures
    // do not depend on earlier runs (nor on an import a failed run left open). Configured databases
    // are never dropped.
    if (!config.databaseUrl) await recreateDatabase(db.url, say, { create: true });
    const sql = connect(db.url, 4);
    await migrate(sql, say);
    const logDir = join(config.dataDir, 'logs');
    await mkdir(logDir, { recursive: true });
    return {
      config,
      databaseUrl: db.url,
      redisUrl: redis.url,
      sql,
      logDir,
      async stop(opts = {}) {
        await sql.end({ timeout: 5 }).catch(() => {});
        if (opts.drop && !config.databaseUrl) await recreateDatabase(db.url, say, { create: false });
        for (const s of started.reverse()) await s.stop().catch((e) => say(`stop failed: ${e}`));
      },
      scratch: config.databaseUrl || opts.citusWorkers ? undefined : (suffix) => scratchDatabase(db.url, suffix, say),
    };
  } catch (e) {
    for (const s of started.reverse()) await s.stop().catch(() => {});
    throw e;
  }
}

async function scratchDatabase(url: string, suffix: string, say: (m: string) => void): Promise<ScratchDatabase> {
  const u = new URL(url);
  const name = `${u.pathname.slice(1)}_${suffix}`;
  u.pathname = `/${name}`;
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const recreate = (create: boolean) => dropAndCreate(admin.toString(), name, create);
  say(`creating database ${name}`);
  await recreate(true);
  const sql = connect(u.toString(), 4);
  try {
    await migrate(sql, () => {});
  } catch (e) {
    await sql.end({ timeout: 5 }).catch(() => {});
    await recreate(false);
    throw e;
  }
  return {
    url: u.toString(),
    sql,
    async drop() {
      await sql.end({ timeout: 5 }).catch(() => {});
      await recreate(false);
      say(`dropped database ${name}`);
    },
  };
}

/**
 * Drops and (with `create`) creates the database. A Citus cluster has it on every node (the workers'
 * copies hold the shards): each is recreated, then the cluster is formed again in the new databases.
 */
async function recreateDatabase(url: string, say: (m: string) => void, opts: { create: boolean }): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  const workers = await citusWorkerUrls(url, 'postgres');
  const coordinator = new URL(url);
  coordinator.pathname = '/postgres';
  const nodes = workers.length ? ` on the coordinator and ${workers.length} workers` : '';
  say(`${opts.create ? 'recreating' : 'dropping'} database ${name}${nodes}`);
  for (const node of [coordinator.toString(), ...workers]) await dropAndCreate(node, name, opts.create);
  const port = (u: string) => Number(new URL(u).port);
  if (opts.create && workers.length) await formCluster(port(url), workers.map(port), say, name);
}

export interface Child {
  name: string;
  proc: Subprocess;
  logFile: string;
  /** set before a deliberate stop, so the exit is not reported as a failure */
  stopping: boolean;
}

/** Fails the run when a child dies while it is still needed. */
const unexpected: string[] = [];
export const childFailures = (): readonly string[] => unexpected;

/**
 * `BENCH_WORKER_PROFILE=<dir>`: the worker runs under Bun's sampling profiler and writes a markdown
 * profile into <dir> when it stops (one file per worker process). For finding where an import's
 * time goes; the profiler slows the worker, so figures of such a run are not comparable.
 */
function profiled(entry: string): string[] {
  const dir = process.env.BENCH_WORKER_PROFILE;
  return dir && entry === 'worker/index.ts' ? ['--cpu-prof-md', `--cpu-prof-dir=${dir}`] : [];
}

export function spawnChild(
  name: string,
  entry: string,
  env: Record<string, string | undefined>,
  logDir: string,
): Child {
  const logFile = join(logDir, `${name}.log`);
  const fd = openSync(logFile, 'w');
  const proc = Bun.spawn([process.execPath, ...profiled(entry), entry], {
    env: { ...process.env, ...env },
    stdin: 'ignore',
    stdout: fd,
    stderr: fd,
  });
  closeSync(fd);
  const child: Child = { name, proc, logFile, stopping: false };
  live.add(child);
  void proc.exited.then((code) => {
    live.delete(child);
    if (!child.stopping) unexpected.push(`${name} exited unexpectedly (code ${code}); see ${logFile}`);
  });
  return child;
}

/**
 * Every child spawnChild started that has not exited yet. A step stops its own children in a
 * `finally` (the HTTP step's baseline server and extra APIs), which an interrupt never reaches: the
 * bench's SIGINT/SIGTERM path stops whatever is still here (stopLiveChildren).
 */
const live = new Set<Child>();

/** Stops every child still running, all at once (the interrupt path, before the infrastructure stops). */
export async function stopLiveChildren(): Promise<void> {
  await Promise.all([...live].map(stopChild));
}

/**
 * `fn` run at most once, every caller waiting for that one run: a stop that a failure, an interrupt
 * and the normal end may all call.
 */
export function once(fn: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => (done ??= fn());
}

export async function stopChild(child: Child): Promise<void> {
  child.stopping = true;
  if (child.proc.exitCode !== null) return;
  child.proc.kill('SIGTERM');
  const killer = setTimeout(() => child.proc.kill('SIGKILL'), 20_000);
  await child.proc.exited;
  clearTimeout(killer);
}

export async function waitHealthy(baseUrl: string, child: Child, path = '/healthz'): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (child.proc.exitCode !== null)
      throw new Error(`${child.name} exited (code ${child.proc.exitCode}) before answering; see ${child.logFile}`);
    if (
      await fetch(`${baseUrl}${path}`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return;
    await Bun.sleep(100);
  }
  throw new Error(`${child.name} did not answer ${path} within 60 s; see ${child.logFile}`);
}

export interface Service {
  baseUrl: string;
  api: Child;
  /** the running worker: a restart replaces it */
  worker: Child;
  /**
   * Stops the worker and starts another with `extra` on top of the service's environment (for a
   * setting the worker reads at start-up); resolves once it has started. Its log is
   * `worker-<name>-<n>.log`. Whoever holds the old worker's pid must take the new one.
   */
  restartWorker(name: string, extra: Record<string, string>): Promise<Child>;
  /**
   * One more API process on the service's database and Redis, with `extra` on top of its environment
   * (the HTTP step's API without rate limits), ready when this resolves; the caller stops it.
   */
  startApi(name: string, extra: Record<string, string>): Promise<{ child: Child; baseUrl: string }>;
  stop(): Promise<void>;
}

/** The API (src/index.ts) and the worker (worker/index.ts) on embedded or configured infrastructure. */
export async function startService(infra: Infra): Promise<Service> {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const env = {
    DATABASE_URL: infra.databaseUrl,
    REDIS_URL: infra.redisUrl,
    DATA_DIR: infra.config.dataDir,
    PORT: String(port),
    HOST: '127.0.0.1',
    PUBLIC_URL: baseUrl,
    MIGRATE_ON_START: 'false',
    // The events step's webhook receiver listens on 127.0.0.1 (bench/steps/events.ts), also with a DATABASE_URL.
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  };
  const api = spawnChild('api', 'src/index.ts', { ...env, APP_NAME: 'bench-api' }, infra.logDir);
  const worker = spawnChild('worker', 'worker/index.ts', { ...env, APP_NAME: 'bench-worker' }, infra.logDir);
  let restarts = 0;
  const service: Service = {
    baseUrl,
    api,
    worker,
    async restartWorker(name, extra) {
      await stopChild(service.worker);
      const env2 = { ...env, ...extra, APP_NAME: 'bench-worker' };
      service.worker = spawnChild(`worker-${name}-${++restarts}`, 'worker/index.ts', env2, infra.logDir);
      await waitWorkerStarted(service.worker);
      return service.worker;
    },
    async startApi(name, extra) {
      const otherPort = await freePort();
      const otherUrl = `http://127.0.0.1:${otherPort}`;
      const apiEnv = { ...env, ...extra, PORT: String(otherPort), PUBLIC_URL: otherUrl, APP_NAME: 'bench-api' };
      const child = spawnChild(name, 'src/index.ts', apiEnv, infra.logDir);
      try {
        await waitHealthy(otherUrl, child, '/readyz');
      } catch (e) {
        await stopChild(child);
        throw e;
      }
      return { child, baseUrl: otherUrl };
    },
    stop: async () => void (await Promise.all([stopChild(api), stopChild(service.worker)])),
  };
  try {
    await waitHealthy(baseUrl, api, '/readyz');
  } catch (e) {
    await service.stop();
    throw e;
  }
  return service;
}

/**
 * Waits until a worker logs that it has started (its queues are open), so an import that follows is
 * not timed waiting for it.
 */
async function waitWorkerStarted(child: Child): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (child.proc.exitCode !== null)
      throw new Error(`${child.name} exited (code ${child.proc.exitCode}) before it started; see ${child.logFile}`);
    if ((await readFile(child.logFile, 'utf8').catch(() => '')).includes('"worker started"')) return;
    await Bun.sleep(100);
  }
  throw new Error(`${child.name} did not log "worker started" within 60 s; see ${child.logFile}`);
}

/**
 * The pgloader executable for the pgloader step (bench/steps/pgloader.ts): Debian's package, installed
 * with apt-get when missing and the bench runs as root, as the embedded Redis gets redis-server.
 */
export async function pgloaderBinary(log: (m: string) => void): Promise<string> {
  const installed = () => Bun.which('pgloader') ?? (existsSync('/usr/bin/pgloader') ? '/usr/bin/pgloader' : undefined);
  const found = installed();
  if (found) return found;
  if (process.getuid?.() !== 0)
    throw new Error(
      'pgloader not found: install it (Debian/Ubuntu: sudo apt-get install -y pgloader) or leave step pgloader out',
    );
  log('[services] pgloader not found: apt-get install -y pgloader');
  const started = Date.now();
  await aptInstall(['pgloader']);
  log(`[services] installed pgloader in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  const path = installed();
  if (!path) throw new Error('apt-get installed pgloader, but no pgloader executable is on the PATH or in /usr/bin');
  return path;
}

/** Kilobytes of a /proc/<pid>/status field (VmHWM = peak RSS, VmRSS = current), undefined without /proc. */
export async function procKb(pid: number, field: 'VmHWM' | 'VmRSS'): Promise<number | undefined> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

/**
 * How far a process has read into the open file whose path contains `part` (Linux fdinfo `pos`),
 * or undefined (not open, not Linux, not ours to look at). The read phase's only progress signal:
 * percentComplete counts merged rows, so it stays 0 while the file is read.
 */
export async function readOffset(pid: number, part: string): Promise<number | undefined> {
  const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
  for (const fd of fds) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    if (!target.includes(part)) continue;
    const info = await readFile(`/proc/${pid}/fdinfo/${fd}`, 'utf8').catch(() => '');
    const m = /^pos:\s+(\d+)/m.exec(info);
    if (m) return Number(m[1]);
  }
  return undefined;
}

/** Resets a process's peak RSS (Linux clear_refs "5"), so each import reports its own peak; false when not allowed. */
export async function resetPeakRss(pid: number): Promise<boolean> {
  return writeFile(`/proc/${pid}/clear_refs`, '5').then(
    () => true,
    () => false,
  );
}

/** Drops database `name` on the server of `adminUrl` (a maintenance database), and with `create` makes it anew. */
async function dropAndCreate(adminUrl: string, name: string, create: boolean): Promise<void> {
  const admin = connect(adminUrl, 1);
  try {
    await admin.unsafe(`drop database if exists "${name}" with (force)`);
    if (create) await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end({ timeout: 5 });
  }
}

// Embedded Citus cluster for dev, tests and CI (CITUS_WORKERS=N, no DATABASE_URL): a coordinator and
// N workers, each a PostgreSQL cluster of its own under `${dataDir}/citus/`, on this machine. Citus is
// built from CITUS_SRC (a release source tarball) when PostgreSQL does not have it yet.
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import postgres from 'postgres';
import { memorySettings } from './memory';
import { aptInstall, run, withLock, type LocalService } from './ports';
import { ensureCluster, findBinDir, urlFor, type LocalCluster } from './postgres';

const DATABASE = 'contacts';

/**
 * The Citus release source beside this repository (../shared/vendor): what the test suite and the
 * bench build Citus from when CITUS_SRC is not set. `npm start` takes CITUS_SRC only.
 */
export const VENDORED_CITUS_SRC = resolve(import.meta.dir, '../../../shared/vendor/citus-13.2.2.tar.gz');

/**
 * Settings of every node. `wal_level = logical` lets the rebalancer move shards (it copies them by
 * logical replication) and prepared transactions carry Citus's two-phase commits over several
 * nodes. Memory is shared out between the nodes of the machine. Production-safe: fsync and
 * synchronous_commit keep their defaults.
 */
function nodeSettings(nodes: number): Record<string, string> {
  return {
    shared_preload_libraries: 'citus',
    wal_level: 'logical',
    max_wal_senders: '10',
    max_replication_slots: '10',
    max_prepared_transactions: '200',
    ...memorySettings(nodes),
    max_wal_size: '4GB',
    checkpoint_timeout: '30min',
    wal_compression: 'lz4',
    // The coordinator opens connections to every worker for each distributed statement.
    max_connections: '300',
  };
}

/**
 * Starts (or reuses) the coordinator and `workers` workers under `${dataDir}/citus/`, with Citus in
 * database `contacts` of each and the workers registered with the coordinator. Returns the
 * coordinator's URL; stop() stops the nodes this call started.
 */
export async function ensureLocalCitus(opts: {
  dataDir: string;
  workers: number;
  citusSrc?: string;
  log?: (msg: string) => void;
}): Promise<LocalService> {
  const log = opts.log ?? (() => {});
  await ensureCitusInstalled({ dataDir: opts.dataDir, citusSrc: opts.citusSrc, log });
  const started: LocalCluster[] = [];
  const stop = async () => {
    await Promise.all(started.map((n) => n.stop()));
  };
  try {
    const node = async (name: string) => {
      const n = await ensureCitusNode({ dataDir: join(opts.dataDir, 'citus'), name, nodes: opts.workers + 1, log });
      started.push(n);
      return n;
    };
    const coordinator = await node('coordinator');
    const workers: LocalCluster[] = [];
    for (let k = 1; k <= opts.workers; k++) workers.push(await node(`worker-${k}`));
    await withLock(join(opts.dataDir, 'citus', 'topology.lock'), () =>
      formCluster(
        coordinator.port,
        workers.map((w) => w.port),
        log,
      ),
    );
    return { url: urlFor(coordinator.port), startedByUs: started.some((n) => n.startedByUs), stop };
  } catch (e) {
    await stop().catch(() => {});
    throw e;
  }
}

/**
 * One node of an embedded cluster: a PostgreSQL cluster `${dataDir}/${name}` with Citus loaded and the
 * settings of a machine shared by `nodes` nodes, started (or reused). Also how a test adds a worker.
 */
export function ensureCitusNode(opts: {
  dataDir: string;
  name: string;
  nodes: number;
  log?: (msg: string) => void;
}): Promise<LocalCluster> {
  return ensureCluster({ dataDir: opts.dataDir, name: opts.name, settings: nodeSettings(opts.nodes), log: opts.log });
}

/**
 * Citus in database `database` of every node, the coordinator's own address recorded and every
 * worker registered; a worker whose port changed since it was added (a restart found its old port
 * taken) is moved to its new one. Idempotent. Also makes a test database a cluster of its own.
 */
export async function formCluster(
  coordinatorPort: number,
  workerPorts: number[],
  log: (msg: string) => void,
  database = DATABASE,
): Promise<void> {
  await Promise.all([coordinatorPort, ...workerPorts].map((port) => withSql(port, database, createExtension)));
  await withSql(coordinatorPort, database, async (sql) => {
    await sql`select citus_set_coordinator_host('127.0.0.1', ${coordinatorPort})`;
    const known = await sql<{ nodeid: number; nodeport: number }[]>`
      select nodeid, nodeport from pg_dist_node where noderole = 'primary' and groupid <> 0 order by nodeid`;
    for (const port of workerPorts) {
      if (known.some((n) => n.nodeport === port)) continue;
      log(`adding Citus worker 127.0.0.1:${port}`);
      await sql`select citus_add_node('127.0.0.1', ${port})`;
    }
  });
}

async function createExtension(sql: postgres.Sql): Promise<void> {
  const [has] = await sql`select 1 from pg_extension where extname = 'citus'`;
  if (!has) await sql`create extension if not exists citus`;
}

/**
 * The workers a Citus coordinator has registered, as URLs: `url` with each worker's host and port
 * (and `database` in place of url's, when given), in port order. None on plain PostgreSQL.
 */
export async function citusWorkerUrls(url: string, database?: string): Promise<string[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [citus] = await sql`select 1 from pg_extension where extname = 'citus'`;
    if (!citus) return [];
    const nodes = await sql<{ nodename: string; nodeport: number }[]>`
      select nodename, nodeport from pg_dist_node where groupid <> 0 and noderole = 'primary' order by nodeport`;
    return nodes.map((n) => {
      const u = new URL(url);
      u.hostname = n.nodename;
      u.port = String(n.nodeport);
      if (database !== undefined) u.pathname = `/${database}`;
      return u.toString();
    });
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function withSql<T>(port: number, database: string, fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(urlFor(port, database), { max: 1, onnotice: () => {} });
  try {
    return await fn(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** The build packages of a Citus release against Debian's PostgreSQL (../shared/vendor/README.md). */
const BUILD_PACKAGES = ['libcurl4-openssl-dev', 'liblz4-dev', 'libzstd-dev', 'libkrb5-dev', 'make', 'gcc'];

/**
 * What a build from source changes in the release (sourceFixes), recorded beside the library it
 * installs (`citus.so.fixes`). A library recorded with fewer is one of these builds from before a
 * fix: it is built again. One without the record was installed otherwise, and is left as it is.
 */
const SOURCE_FIXES = ['pg15-minor-createdb-privilege', 'local-plan-cache-reuse'];

/**
 * Makes sure PostgreSQL can load Citus: when its library directory lacks citus.so, or holds one that
 * this function built before a source fix was added, builds and installs it from the release source
 * tarball `citusSrc`, installing the build packages with apt-get (about 2.5 minutes on 2 cores).
 * One build at a time per data directory.
 */
export async function ensureCitusInstalled(opts: {
  dataDir: string;
  citusSrc?: string;
  log: (msg: string) => void;
}): Promise<void> {
  const bin = await findBinDir();
  const library = join(dirname(bin), 'lib', 'citus.so');
  const record = `${library}.fixes`;
  const current = async () => {
    if (!existsSync(library)) return false;
    if (!existsSync(record)) return true; // not built here: not ours to replace
    const fixes = (await readFile(record, 'utf8')).split('\n');
    return SOURCE_FIXES.every((f) => fixes.includes(f));
  };
  if (await current()) return;
  const src = opts.citusSrc;
  if (!src || !existsSync(src)) {
    throw new Error(
      `Citus is not installed (${library} is missing) ` +
        (src ? `and CITUS_SRC (${src}) does not exist. ` : 'and CITUS_SRC is not set. ') +
        'Set CITUS_SRC to a Citus release source tarball (github.com/citusdata/citus/releases; this ' +
        'repository uses ../shared/vendor/citus-13.2.2.tar.gz) to have it built and installed, or install ' +
        'Citus for your PostgreSQL (https://docs.citusdata.com/en/stable/installation/single_node_debian.html).',
    );
  }
  await mkdir(opts.dataDir, { recursive: true });
  await withLock(join(opts.dataDir, 'citus-build.lock'), async () => {
    if (await current()) return; // built by another starter meanwhile
    const version = await run([join(bin, 'postgres'), '--version']);
    const major = version.out.match(/\(PostgreSQL\) (\d+)/)?.[1];
    if (!major) throw new Error(`could not tell the PostgreSQL version of ${bin}: ${version.out || version.err}`);
    const pgConfig = join(bin, 'pg_config');
    const packages = [`postgresql-server-dev-${major}`, ...BUILD_PACKAGES];
    opts.log(`building Citus from ${src}: apt-get install -y ${packages.join(' ')}`);
    await aptInstall(packages);
    const dir = join(opts.dataDir, 'citus-build');
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    const steps: [string, string[]][] = [
      ['unpack', ['tar', '-xzf', src, '-C', dir, '--strip-components=1']],
      ['configure', ['sh', '-c', `cd '${dir}' && PG_CONFIG='${pgConfig}' ./configure`]],
      ['make', ['make', '-C', dir, `-j${availableParallelism()}`]],
      ['make install', ['make', '-C', dir, 'install']],
    ];
    for (const [name, cmd] of steps) {
      opts.log(`building Citus: ${name}`);
      const step = await run(cmd);
      if (step.code !== 0)
        throw new Error(`Citus ${name} failed (exit ${step.code}):\n${(step.err || step.out).slice(-2000)}`);
      if (name === 'unpack') await sourceFixes(dir);
    }
    if (!existsSync(library)) throw new Error(`Citus was built from ${src} but ${library} is still missing`);
    await writeFile(record, `${SOURCE_FIXES.join('\n')}\n`);
    await rm(dir, { recursive: true, force: true });
    opts.log('Citus installed');
  });
}

/** The release's source as this repository builds it (SOURCE_FIXES names each change). */
async function sourceFixes(dir: string): Promise<void> {
  await adaptToMinor(dir);
  await reuseLocalPlans(dir);
}

/**
 * Citus 13.2.2 never finds the local plan it caches for a prepared fast-path statement (one
 * distributed table, its distribution column bound to a parameter) run on the node that holds the
 * shard: the lookup requires the persistent plan to hold exactly one task, and a plan whose shard is
 * chosen at execution holds none. So every execution plans the shard query again and appends
 * another plan to the prepared statement's cache: 33 KB per execution measured here, without bound,
 * in every backend an API on a worker node uses (citusdata/citus#8783, fixed upstream by #8824).
 * The lookup refuses only plans of several tasks, the multi-shard case it was added for (#8371);
 * the caller caches only single-task executions.
 */
async function reuseLocalPlans(dir: string): Promise<void> {
  const file = join(dir, 'src/backend/distributed/planner/local_plan_cache.c');
  const text = await readFile(file, 'utf8');
  const lookup = 'if (list_length(distributedPlan->workerJob->taskList) != 1)';
  if (!text.includes(lookup)) return;
  await writeFile(file, text.replace(lookup, 'if (list_length(distributedPlan->workerJob->taskList) > 1)'));
}

/**
 * Citus 13.2.2 defines its own `static inline have_createdb_privilege()` for PostgreSQL 15, which
 * did not export it; a later 15.x minor does (15.20, which apt-get now installs with the build
 * packages; 15.18 did not): both declarations meet in commands/database.c and the build stops
 * ("static declaration of 'have_createdb_privilege' follows non-static declaration"). Citus's copy
 * is renamed so that it builds against every 15.x minor; the two make the same check.
 */
async function adaptToMinor(dir: string): Promise<void> {
  const header = join(dir, 'src/include/pg_version_compat.h');
  const text = await readFile(header, 'utf8');
  const own = 'static inline bool\nhave_createdb_privilege(void)\n';
  if (!text.includes(own)) return;
  await writeFile(header, text.replace(own, `#define have_createdb_privilege citus_have_createdb_privilege\n${own}`));
}

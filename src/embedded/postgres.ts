// Embedded PostgreSQL for dev, tests and CI when no DATABASE_URL is set: one cluster per data
// directory, started with pg_ctl (so it outlives its starter and can be shared) and reused while it runs.
import { existsSync, readdirSync } from 'node:fs';
import { chmod, chown, mkdir, readFile, readdir, rename, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import postgres from 'postgres';
import { memorySettings } from './memory';
import { freePort, isPortOpen, pidAlive, procName, run, sleep, tail, withLock, type LocalService } from './ports';

// Server settings, passed on the command line at every start (that beats the conf files, so an edit
// here applies on the next start). Memory is sized from the machine's (memory.ts); the rest is for
// bulk loads and still production-safe: fsync, full_page_writes and synchronous_commit keep their
// crash-safe defaults.
const SETTINGS: Record<string, string> = {
  ...memorySettings(),
  max_wal_size: '8GB', // multi-GB COPYs without checkpoints forced every few seconds
  checkpoint_timeout: '30min', // spreads checkpoint I/O over long imports
  // Full-page images are most of the WAL of a bulk update after each checkpoint (a 25M-row import
  // B checkpointed every ~55 s on WAL volume); lz4 shrinks them for little CPU. Production-safe.
  wal_compression: 'lz4',
  wal_level: 'minimal', // no replicas: COPY into a table created in the same transaction skips WAL
  max_wal_senders: '0', // required by wal_level=minimal
  max_connections: '200', // API + worker pools + parallel test files
};

const DATABASE = 'contacts';
const PG_USER = 'postgres';
const isRoot = () => process.getuid?.() === 0;
export const urlFor = (port: number, database = DATABASE) => `postgres://${PG_USER}@127.0.0.1:${port}/${database}`;
const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** Runs a PostgreSQL binary, as the postgres OS user when we are root (the server refuses to run as root). */
export const pgRun = (bin: string, args: string[]) =>
  run(isRoot() ? ['runuser', '-u', PG_USER, '--', bin, ...args] : [bin, ...args]);

export async function findBinDir(): Promise<string> {
  const cfg = await run(['pg_config', '--bindir']);
  // pg_config may come from libpq-dev alone, pointing at a version without server binaries
  if (cfg.code === 0 && existsSync(join(cfg.out, 'initdb'))) return cfg.out;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (newest) return join(root, newest, 'bin');
  const initdb = Bun.which('initdb');
  if (initdb) return dirname(initdb);
  throw new Error(
    'PostgreSQL server binaries (initdb, pg_ctl) not found: install PostgreSQL 15+ ' +
      '(Debian: apt-get install -y postgresql) or set DATABASE_URL',
  );
}

/** uid/gid that own the cluster when we are root; creates the postgres user if the machine lacks it. */
async function clusterOwner(): Promise<{ uid: number; gid: number } | undefined> {
  if (!isRoot()) return undefined;
  if ((await run(['id', '-u', PG_USER])).code !== 0) {
    const add = await run([
      'useradd',
      '--system',
      '--user-group',
      '--no-create-home',
      '--shell',
      '/usr/sbin/nologin',
      PG_USER,
    ]);
    if (add.code !== 0) throw new Error(`could not create the ${PG_USER} OS user: ${add.err}`);
  }
  const [uid, gid] = await Promise.all([run(['id', '-u', PG_USER]), run(['id', '-g', PG_USER])]);
  return { uid: Number(uid.out), gid: Number(gid.out) };
}

/** The postgres user must be able to reach the cluster: add the "others may traverse" bit up to /. */
async function makeTraversable(dir: string): Promise<void> {
  for (let d = dir; d !== dirname(d); d = dirname(d)) {
    const { mode } = await stat(d);
    if ((mode & 0o001) === 0) await chmod(d, (mode & 0o7777) | 0o001);
  }
}

/** Port of a live, ready postmaster on this cluster; clears leftovers of a dead one. */
async function runningPort(dir: string): Promise<number | undefined> {
  const pidFile = join(dir, 'postmaster.pid');
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const lines = await readFile(pidFile, 'utf8').then(
      (t) => t.split('\n'),
      () => undefined,
    );
    if (!lines) return undefined;
    const pid = Number(lines[0]);
    const name = procName(pid);
    if (!pidAlive(pid) || (name !== undefined && name !== 'postgres' && name !== 'postmaster')) {
      // Left by a crash or a killed container; with a recycled pid the server would refuse to start.
      const sockets = (await readdir(dir)).filter((f) => f.startsWith('.s.PGSQL.'));
      await Promise.all([pidFile, ...sockets.map((f) => join(dir, f))].map((f) => rm(f, { force: true })));
      return undefined;
    }
    // Line 4 is the port, line 8 the postmaster status; "starting"/"stopping" settle shortly.
    const port = Number(lines[3]);
    if (lines[7]?.trim() === 'ready' && (await isPortOpen(port))) return port;
    await sleep(250);
  }
  throw new Error(
    `PostgreSQL in ${dir} is running but not accepting TCP connections on 127.0.0.1; see ${join(dir, 'log')}`,
  );
}

async function initCluster(bin: string, dir: string, owner: { uid: number; gid: number } | undefined): Promise<void> {
  // An empty leftover directory is fine; anything else is not ours to delete.
  await rmdir(dir).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'ENOENT')
      throw new Error(`${dir} exists but is not a PostgreSQL cluster (no PG_VERSION); remove it`, { cause: e });
  });
  // initdb into a side directory and rename: an interrupted initdb never leaves a half-made cluster.
  const tmp = `${dir}.initdb`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { mode: 0o700 });
  if (owner) await chown(tmp, owner.uid, owner.gid);
  // Byte-order collation (fast, stable sorts) with a UTF-8 ctype so lower() folds non-ASCII letters.
  const r = await pgRun(join(bin, 'initdb'), [
    '-D',
    tmp,
    '-U',
    PG_USER,
    '--auth=trust',
    '-E',
    'UTF8',
    '--lc-collate=C',
    '--lc-ctype=C.UTF-8',
  ]);
  if (r.code !== 0) throw new Error(`initdb failed (exit ${r.code}): ${r.err || r.out}`);
  await rename(tmp, dir);
}

async function startCluster(
  bin: string,
  dir: string,
  settings: Record<string, string>,
  log: (msg: string) => void,
  preferredPort?: number,
): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const port =
      attempt === 1 && preferredPort && !(await isPortOpen(preferredPort)) ? preferredPort : await freePort();
    const conf = { ...settings, port: String(port), listen_addresses: '127.0.0.1', unix_socket_directories: dir };
    // pg_ctl hands -o to /bin/sh, hence the quoting
    const opts = Object.entries(conf)
      .map(([k, v]) => `-c ${k}=${shellQuote(v)}`)
      .join(' ');
    log(`starting PostgreSQL (${dir}) on 127.0.0.1:${port}`);
    const logFile = join(dir, 'log');
    const r = await pgRun(join(bin, 'pg_ctl'), ['start', '-w', '-t', '300', '-D', dir, '-l', logFile, '-o', opts]);
    if (r.code === 0) return port;
    const lastLines = await tail(logFile);
    // The free port can be taken between freePort() and the bind: pick another.
    if (attempt < 3 && /could not bind|already in use/i.test(lastLines)) continue;
    throw new Error(`pg_ctl start failed (exit ${r.code}): ${r.err || r.out}\n${lastLines}`);
  }
}

export async function createDatabase(port: number, database = DATABASE): Promise<void> {
  const sql = postgres({
    host: '127.0.0.1',
    port,
    username: PG_USER,
    database: 'postgres',
    max: 1,
    onnotice: () => {},
  });
  try {
    const found = await sql`select 1 from pg_database where datname = ${database}`;
    if (found.length === 0) {
      await sql.unsafe(`create database ${database}`).catch((e: { code?: string }) => {
        if (e.code !== '42P04') throw e; // 42P04 duplicate_database: someone else was quicker
      });
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function stopCluster(bin: string, dir: string, log: (msg: string) => void): Promise<void> {
  log(`stopping PostgreSQL (${dir})`);
  const r = await pgRun(join(bin, 'pg_ctl'), ['stop', '-D', dir, '-m', 'fast', '-w', '-t', '300']);
  if (r.code !== 0 && existsSync(join(dir, 'postmaster.pid')))
    throw new Error(`pg_ctl stop failed (exit ${r.code}): ${r.err || r.out}`);
}

/**
 * Starts (or reuses) the local cluster in `${dataDir}/postgres` and makes sure database `contacts` exists.
 * @example const pg = await ensureLocalPostgres({ dataDir: '/work/main/.data', log: console.log })
 */
export async function ensureLocalPostgres(opts: {
  dataDir: string;
  log?: (msg: string) => void;
}): Promise<LocalService> {
  const node = await ensureCluster({ dataDir: opts.dataDir, name: 'postgres', settings: SETTINGS, log: opts.log });
  return { url: urlFor(node.port), startedByUs: node.startedByUs, stop: node.stop };
}

/** One running PostgreSQL server of this machine: its port, and stop() for what this call started. */
export interface LocalCluster {
  port: number;
  startedByUs: boolean;
  stop(): Promise<void>;
}

/**
 * Starts (or reuses) the PostgreSQL cluster in `${dataDir}/${name}` with `settings`, and makes sure
 * database `contacts` exists. A cluster started again takes the port it had when it can, and another
 * free one when that is taken (a caller that must know, like the Citus coordinator, compares).
 */
export async function ensureCluster(opts: {
  dataDir: string;
  name: string;
  settings: Record<string, string>;
  log?: (msg: string) => void;
}): Promise<LocalCluster> {
  const log = opts.log ?? (() => {});
  const dir = join(opts.dataDir, opts.name);
  await mkdir(dirname(dir), { recursive: true });
  return withLock(`${dir}.lock`, async () => {
    const running = await runningPort(dir);
    if (running) {
      log(`reusing PostgreSQL (${dir}) on 127.0.0.1:${running}`);
      await createDatabase(running);
      return { port: running, startedByUs: false, stop: async () => {} };
    }
    const bin = await findBinDir();
    const owner = await clusterOwner();
    if (owner) await makeTraversable(opts.dataDir);
    if (!existsSync(join(dir, 'PG_VERSION'))) {
      log(`initdb ${dir}`);
      await initCluster(bin, dir, owner);
    } else if (owner && (await stat(dir)).uid !== owner.uid) {
      // A cluster made by a non-root run: hand it to the postgres user, which runs the server now.
      await run(['chown', '-R', `${owner.uid}:${owner.gid}`, dir]);
    }
    const portFile = join(dir, 'embedded.port');
    const lastPort = Number(await readFile(portFile, 'utf8').catch(() => '')) || undefined;
    const port = await startCluster(bin, dir, opts.settings, log, lastPort);
    await writeFile(portFile, `${port}\n`);
    await createDatabase(port);
    let stopping: Promise<void> | undefined;
    return { port, startedByUs: true, stop: () => (stopping ??= stopCluster(bin, dir, log)) };
  });
}

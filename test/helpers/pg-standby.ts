/**
 * A PostgreSQL primary with a streaming standby, from the PostgreSQL binaries, for failover tests
 * and the chaos soak: synchronous replication on (a commit is acknowledged once the standby has
 * flushed it), a failover (the primary killed with `-m immediate`, the standby promoted), and the old
 * primary rebuilt as the new standby (pg_rewind, or a fresh pg_basebackup when the rewind fails).
 * `url` names both servers with target_session_attrs=read-write, as the service's DATABASE_URL would.
 *
 * @example
 * const pair = await startPgPair(dataDir);           // pair.url: both hosts, read-write
 * const { promotedAt } = await pair.failover();      // pair.primary() is the other node now
 * await pair.rebuildStandby();                       // the old primary streams from the new one
 * await pair.stop();
 */
import { appendFile, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import postgres from 'postgres';
import { freePort } from '../../src/embedded';
import { ensureCluster, findBinDir, pgRun } from '../../src/embedded/postgres';
import { memorySettings } from '../../src/embedded/memory';

/** One server of the pair: its data directory, port and single-host URL (to look at it alone). */
export interface PgNode {
  name: string;
  dir: string;
  /** The server's log, beside its directory (pg_rewind and pg_basebackup copy what is inside). */
  log: string;
  port: number;
  url: string;
}

export interface PgPair {
  /** Both servers, with target_session_attrs=read-write: postgres.js connects to whichever is the primary. */
  url: string;
  nodes: readonly [PgNode, PgNode];
  primary(): PgNode;
  /** The streaming standby; undefined between a failover and the rebuild. */
  standby(): PgNode | undefined;
  /**
   * Kills the primary (`pg_ctl stop -m immediate`), waits `promoteAfterMs` (what a failover manager
   * takes to decide; 0 by default), promotes the standby and waits until it accepts writes.
   * `killedAt`/`promotedAt` are Date.now() when the kill and the promotion ended. The new primary
   * runs without a synchronous standby (commits would wait for one forever) until rebuildStandby().
   */
  failover(opts?: {
    promoteAfterMs?: number;
  }): Promise<{ killed: PgNode; promoted: PgNode; killedAt: number; promotedAt: number }>;
  /** `pg_ctl restart -m immediate` of the primary (crash recovery, same port); the standby follows it again. */
  restartPrimary(): Promise<void>;
  /** Makes the killed primary a standby of the new one and turns synchronous replication on again. */
  rebuildStandby(): Promise<{ how: 'pg_rewind' | 'pg_basebackup'; ms: number }>;
  stop(): Promise<void>;
}

const DATABASE = 'contacts';

/**
 * The embedded server's settings (src/embedded/postgres.ts) but what replication needs: WAL for a
 * standby, wal senders, hot standby (the test reads the standby), wal_log_hints for pg_rewind. The
 * memory of two nodes on one machine. synchronous_standby_names is not here: it is set with ALTER
 * SYSTEM on whichever node is the primary, once its standby streams (a setting on the command line
 * would beat ALTER SYSTEM, and a promoted node with it would wait for a standby that is gone).
 */
const SETTINGS: Record<string, string> = {
  ...memorySettings(2),
  max_wal_size: '2GB',
  checkpoint_timeout: '30min',
  wal_compression: 'lz4',
  wal_level: 'replica',
  // The default: pg_rewind's crash recovery of the killed node runs with the default (see
  // startPgPair), and a standby refuses to replay WAL of a primary that had more than it has.
  max_wal_senders: '10',
  wal_keep_size: '1GB',
  wal_log_hints: 'on',
  hot_standby: 'on',
  max_connections: '200',
  // Each session in the node's log with its application_name: what reached a node, and from whom.
  log_connections: 'on',
};

const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
const urlOf = (port: number) => `postgres://postgres@127.0.0.1:${port}/${DATABASE}`;
const conninfo = (port: number, app: string) => `host=127.0.0.1 port=${port} user=postgres application_name=${app}`;

async function must(what: string, r: Promise<{ code: number; out: string; err: string }>, node?: PgNode) {
  const { code, out, err } = await r;
  if (code === 0) return out;
  const log = node ? await readFile(node.log, 'utf8').catch(() => '') : '';
  throw new Error(`${what} failed (exit ${code}): ${err || out}\n${log.split('\n').slice(-15).join('\n')}`);
}

/** One short-lived connection to a single server: for the helper's own statements. */
async function on<T>(port: number, fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(urlOf(port), { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    return await fn(sql);
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

async function waitUntil(what: string, check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check().catch(() => false)) return;
    await Bun.sleep(50);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

/**
 * Starts the pair under `dataDir` (`pg-a` the first primary, `pg-b` its standby): initdb and the
 * `contacts` database on the primary, a pg_basebackup for the standby, synchronous replication on.
 * A few seconds.
 */
export async function startPgPair(dataDir: string): Promise<PgPair> {
  const bin = await findBinDir();
  const pg = (name: string, args: string[], node?: PgNode) =>
    must(`${name} ${args[0]}`, pgRun(join(bin, name), args), node);
  // The nodes and their logs in a directory of the postgres OS user's, which pg_basebackup writes in.
  const root = join(dataDir, 'pg-pair');
  await mkdir(root, { recursive: true });
  await chownToPostgres(root);
  const first = await ensureCluster({ dataDir: root, name: 'pg-a', settings: SETTINGS });
  await first.stop(); // started by ensureCluster with its log inside; from here on by start() below
  // pg_rewind's crash recovery of the killed node (single-user mode) sees the configuration files,
  // not our command line: wal_log_hints goes into the control file it checks, and without
  // wal_keep_size the end-of-recovery checkpoint recycles the WAL it reads back to the fork.
  // The standby copies this file.
  await appendFile(join(root, 'pg-a', 'postgresql.conf'), `wal_log_hints = on\nwal_keep_size = '1GB'\n`);
  await rm(join(root, 'pg-a', 'embedded.port')); // ensureCluster's, written as root: pg_rewind could not replace it
  const node = (name: string, port: number): PgNode => ({
    name,
    dir: join(root, name),
    log: join(root, `${name}.log`),
    port,
    url: urlOf(port),
  });
  const a = node('pg-a', first.port);
  const bPort = await freePort();
  const b = node('pg-b', bPort);
  const nodes = [a, b] as const;
  let primary: PgNode = a;
  let standby: PgNode | undefined;
  let killed: PgNode | undefined;

  const options = (node: PgNode) =>
    Object.entries({ ...SETTINGS, port: String(node.port), listen_addresses: '127.0.0.1', unix_socket_directories: '' })
      .map(([k, v]) => `-c ${k}=${shellQuote(v)}`)
      .join(' ');
  const start = async (node: PgNode) => {
    // TCP only (unix_socket_directories above): ensureCluster's first start put the sockets in the
    // data directory, where pg_rewind and pg_basebackup would copy their lock files (a server refuses
    // to start beside another's) or choke on the socket itself.
    for (const f of await readdir(node.dir))
      if (f.startsWith('.s.PGSQL.')) await rm(join(node.dir, f), { force: true });
    await rm(join(node.dir, 'postmaster.pid'), { force: true });
    await pg('pg_ctl', ['start', '-w', '-t', '120', '-D', node.dir, '-l', node.log, '-o', options(node)], node);
  };
  const followPrimary = async (node: PgNode) => {
    // What pg_basebackup -R / pg_rewind -R would write, with the node's name as application_name
    // (what pg_stat_replication and synchronous_standby_names see).
    await appendFile(
      join(node.dir, 'postgresql.auto.conf'),
      `primary_conninfo = '${conninfo(primary.port, node.name)}'\n`,
    );
    await writeFile(join(node.dir, 'standby.signal'), '');
    await chownToPostgres(node.dir);
  };
  /** Streams, and commits on the primary wait for it. */
  const synchronous = async (node: PgNode) => {
    await waitUntil(`${node.name} streaming from ${primary.name}`, () =>
      on(primary.port, async (sql) => {
        const rows =
          await sql`select 1 from pg_stat_replication where application_name = ${node.name} and state = 'streaming'`;
        return rows.length === 1;
      }),
    );
    await on(primary.port, async (sql) => {
      await sql.unsafe(`alter system set synchronous_standby_names = '"${node.name}"'`);
      await sql`select pg_reload_conf()`;
    });
    await waitUntil(`${node.name} synchronous`, () =>
      on(primary.port, async (sql) => {
        const rows =
          await sql`select 1 from pg_stat_replication where application_name = ${node.name} and sync_state = 'sync'`;
        return rows.length === 1;
      }),
    );
  };
  const basebackup = async (node: PgNode) => {
    await rm(node.dir, { recursive: true, force: true });
    await pg('pg_basebackup', ['-D', node.dir, '-d', conninfo(primary.port, node.name), '-X', 'stream', '-c', 'fast']);
    // The primary's log and pid file are not copied; its auto.conf is, without primary_conninfo.
    await followPrimary(node);
    await start(node);
  };

  await start(a);
  await basebackup(b);
  standby = b;
  await synchronous(b);

  return {
    url: `postgres://postgres@127.0.0.1:${a.port},127.0.0.1:${b.port}/${DATABASE}?target_session_attrs=read-write`,
    nodes,
    primary: () => primary,
    standby: () => standby,
    async failover({ promoteAfterMs = 0 } = {}) {
      if (!standby) throw new Error('no standby to promote: rebuildStandby() first');
      const old = primary;
      const next = standby;
      await pg('pg_ctl', ['stop', '-D', old.dir, '-m', 'immediate', '-w', '-t', '60'], old);
      const killedAt = Date.now();
      if (promoteAfterMs > 0) await Bun.sleep(promoteAfterMs);
      await pg('pg_ctl', ['promote', '-w', '-t', '60', '-D', next.dir], next);
      // The new primary has no standby yet: nothing it commits may wait for one (a standby's
      // auto.conf has no synchronous_standby_names, see SETTINGS; the reset is for a copy that had).
      await on(next.port, async (sql) => {
        await sql.unsafe(`alter system reset synchronous_standby_names`);
        await sql`select pg_reload_conf()`;
      });
      await waitUntil(`${next.name} accepting writes`, () =>
        on(next.port, async (sql) => {
          const [r] = await sql<{ ro: string }[]>`select current_setting('transaction_read_only') as ro`;
          return r!.ro === 'off';
        }),
      );
      const promotedAt = Date.now();
      [primary, standby, killed] = [next, undefined, old];
      return { killed: old, promoted: next, killedAt, promotedAt };
    },
    async restartPrimary() {
      const node = primary;
      await pg('pg_ctl', ['stop', '-D', node.dir, '-m', 'immediate', '-w', '-t', '60'], node);
      await start(node);
    },
    async rebuildStandby() {
      if (!killed) throw new Error('no old primary to rebuild: failover() first');
      const node = killed;
      const began = Date.now();
      let how: 'pg_rewind' | 'pg_basebackup' = 'pg_rewind';
      // pg_rewind runs crash recovery on the killed node first (single-user mode), then copies what
      // differs since the timelines forked. It reads the source's timeline from its control file,
      // which a promotion updates only at its next checkpoint: without one it saw "the same
      // timeline", rewound nothing, and the node never streamed. A rewind that fails leaves the
      // directory unusable: copy anew.
      await on(primary.port, (sql) => sql`checkpoint`);
      const rewind = await pgRun(join(bin, 'pg_rewind'), [
        '-D',
        node.dir,
        `--source-server=${conninfo(primary.port, 'pg_rewind')} dbname=postgres`,
      ]);
      if (rewind.code === 0) {
        await followPrimary(node);
        await start(node);
      } else {
        console.error(`pg-standby: pg_rewind of ${node.name} failed, copying anew: ${rewind.err || rewind.out}`);
        how = 'pg_basebackup';
        await basebackup(node);
      }
      standby = node;
      killed = undefined;
      await synchronous(node);
      return { how, ms: Date.now() - began };
    },
    async stop() {
      for (const node of nodes)
        await pgRun(join(bin, 'pg_ctl'), ['stop', '-D', node.dir, '-m', 'immediate', '-w', '-t', '60']).catch(() => {});
    },
  };
}

/** Files the helper wrote as root in a data directory the server (the postgres OS user) must own. */
async function chownToPostgres(dir: string): Promise<void> {
  if (process.getuid?.() !== 0) return;
  const p = Bun.spawn(['chown', '-R', 'postgres:postgres', dir], { stdout: 'ignore', stderr: 'pipe' });
  if ((await p.exited) !== 0) throw new Error(`chown of ${dir} failed: ${await new Response(p.stderr).text()}`);
}

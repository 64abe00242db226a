/**
 * The soak's bed (issue 58): PostgreSQL as a primary with a synchronous standby
 * (test/helpers/pg-standby.ts), so a failover is one of the faults; each node's tables on a disk
 * of its own (disk-full.ts), so the primary's disk can fill; s3rver behind the fault proxy
 * (test/helpers/s3-fault-bed.ts) as the object store; a redis-server that keeps nothing.
 *
 * The soak runs on S3 only: the object store's faults are S3's (500, SlowDown, resets, stalls, bodies
 * cut short), and the embedded local store's full disk (an upload's 507) stays with its own test,
 * fault-disk-full-store.test.ts. The disk that fills is PostgreSQL's: the one every request and import
 * writes to.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Sql } from '../../../src/db';
import { findBinDir, pgRun } from '../../../src/embedded/postgres';
import { migrate } from '../../../src/migrate';
import { redisServer } from '../fault-bed';
import { s3FaultBed, type S3FaultBed } from '../s3-fault-bed';
import { startPgPair, type PgNode, type PgPair } from '../pg-standby';
import { baseOnOwnDisk, type BaseDisk } from './disk-full';

export interface SoakBed {
  dataDir: string;
  /** Both servers, target_session_attrs=read-write. */
  databaseUrl: string;
  redisUrl: string;
  /** Unused by the stack on S3; its DATA_DIR lives beside it. */
  storeDir: string;
  /** Follows whichever server is the primary. */
  sql: Sql;
  pair: PgPair;
  s3: S3FaultBed;
  /** The stack's env for the store behind the proxy. */
  storeEnv: Record<string, string>;
  /** `pg_ctl restart -m immediate` of the current primary. */
  restartPostgres(): Promise<void>;
  killRedis(): Promise<void>;
  startRedis(): Promise<void>;
  /** The disk under a node's tables. */
  disk(node: PgNode): BaseDisk;
  /** Starts the primary's server if it stopped (what a service manager does); true if it had to. */
  startPrimaryIfStopped(): Promise<boolean>;
  stop(): Promise<void>;
}

/**
 * Each node's tables disk, sparse (only what is written takes room): the full soak and its replay
 * hold about 12 million contacts, some 550 bytes each with their indexes (measured by the CI shape).
 */
export const BASE_DISK_BYTES = 16 * 1024 ** 3;

export async function soakBed(): Promise<SoakBed> {
  const dataDir = await mkdtemp(join(tmpdir(), 'soak-bed-'));
  const bin = await findBinDir();
  const pgCtl = (args: string[]) => pgRun(join(bin, 'pg_ctl'), args);
  const pair = await startPgPair(dataDir);
  const disks = new Map<string, BaseDisk>();
  const startNode = async (node: PgNode) => {
    // The node's last command line (pg-standby's settings and port): `binary "-D" "dir" "-c" "k=v" …`.
    const opts = (await readFile(join(node.dir, 'postmaster.opts'), 'utf8')).replace(/^\S+\s+"-D"\s+"[^"]*"\s*/, '');
    const r = await pgCtl(['start', '-w', '-t', '120', '-D', node.dir, '-l', node.log, '-o', opts.trim()]);
    if (r.code !== 0) throw new Error(`pg_ctl start of ${node.name} failed: ${r.err || r.out}`);
  };
  // The standby first, then the primary (the standby streams again once it is back).
  for (const node of [pair.standby()!, pair.primary()]) {
    const r = await pgCtl(['stop', '-D', node.dir, '-m', 'fast', '-w', '-t', '60']);
    if (r.code !== 0) throw new Error(`pg_ctl stop of ${node.name} failed: ${r.err || r.out}`);
    disks.set(node.name, await baseOnOwnDisk(node.dir, BASE_DISK_BYTES));
    await startNode(node);
  }
  const sql = connect(pair.url, 4);
  await migrate(sql);
  const redis = await redisServer(dataDir);
  const s3 = await s3FaultBed({ requestTimeoutMs: 2_000, maxAttempts: 4 });

  return {
    dataDir,
    databaseUrl: pair.url,
    redisUrl: redis.url,
    storeDir: join(dataDir, 'objects'),
    sql,
    pair,
    s3,
    storeEnv: s3.env,
    restartPostgres: () => pair.restartPrimary(),
    killRedis: redis.kill,
    startRedis: redis.start,
    disk: (node) => disks.get(node.name)!,
    async startPrimaryIfStopped() {
      const node = pair.primary();
      if ((await pgCtl(['status', '-D', node.dir])).code === 0) return false;
      await startNode(node);
      return true;
    },
    async stop() {
      await sql.end({ timeout: 2 }).catch(() => {});
      await redis.kill();
      await s3.stop().catch(() => {});
      await pair.stop();
      for (const d of disks.values()) await d.unmount();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

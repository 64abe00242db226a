/**
 * A bed for process tests on the Citus cluster of the test run (test/cluster/): the file's own
 * database on the coordinator and its workers, the run's redis-server on a database index of its
 * own, emptied as the bed starts (other files' leftover jobs stay apart), a local object store, and the real
 * worker and API as child processes (fault-bed.ts's childProcesses). PostgreSQL and Redis are shared
 * with the run, so unlike a fault bed this one does not restart them.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import IORedis from 'ioredis';
import { createTestDatabase } from './db';
import { childProcesses, type ProcessBed } from './fault-bed';

/** A Redis database index the cluster beds use, away from index 0 of the other test files. */
const REDIS_DB = 7;

export async function clusterBed(env: Record<string, string> = {}): Promise<ProcessBed> {
  const db = await createTestDatabase();
  const [citus] = await db.sql`select 1 from pg_extension where extname = 'citus'`;
  if (!citus) {
    await db.drop();
    throw new Error('a cluster bed needs the Citus cluster: CITUS_WORKERS=2 bun test/run.ts test/cluster');
  }
  const dataDir = await mkdtemp(join(tmpdir(), 'cluster-bed-'));
  const storeDir = join(dataDir, 'objects');
  const redisUrl = `${db.redisUrl.replace(/\/\d*$/, '')}/${REDIS_DB}`;
  // Emptied first: the beds of earlier files share this index, and their leftover jobs (their
  // databases dropped since) would go to this bed's worker before its own.
  const redis = new IORedis(redisUrl, { maxRetriesPerRequest: 3 });
  try {
    await redis.flushdb();
  } finally {
    redis.disconnect();
  }
  const processes = childProcesses(dataDir, {
    ...(process.env as Record<string, string>),
    DATABASE_URL: db.url,
    REDIS_URL: redisUrl,
    DATA_DIR: dataDir,
    STORAGE_DRIVER: 'local',
    STORAGE_DIR: storeDir,
    UPLOAD_SECRET: 'cluster-bed-upload-secret',
    MIGRATE_ON_START: 'false',
    LOG_LEVEL: 'info',
    ...env,
  });
  return {
    ...processes,
    dataDir,
    databaseUrl: db.url,
    redisUrl,
    storeDir,
    sql: db.sql,
    async stop() {
      await processes.stopAll();
      await db.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

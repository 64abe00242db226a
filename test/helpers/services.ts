import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadConfig } from '../../src/config';
import { connect } from '../../src/db';
import { migrate } from '../../src/migrate';
import { citusWorkerUrls } from '../../src/embedded/citus';
import { resolveDatabaseUrl, resolveRedisUrl } from '../../src/embedded/urls';

const MIGRATIONS = resolve(import.meta.dir, '../../sql/migrations');

/**
 * The template is named by a hash of the migration files: runs with the same migrations reuse it,
 * and concurrent runs never drop a template another run is cloning.
 */
export const TEMPLATE_DB = (() => {
  const hash = createHash('sha256');
  for (const f of readdirSync(MIGRATIONS).sort()) hash.update(f).update(readFileSync(join(MIGRATIONS, f)));
  return `contacts_tpl_${hash.digest('hex').slice(0, 16)}`;
})();

export interface TestServices {
  /** URL of the server's maintenance database, for CREATE/DROP DATABASE (on Citus: the coordinator's). */
  adminUrl: string;
  redisUrl: string;
  /** On a Citus cluster (CITUS_WORKERS): the workers' maintenance database URLs; else empty. */
  citusWorkers: string[];
  stop(): Promise<void>;
}

/** Replaces the database name of a postgres URL. */
export function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

/**
 * The same mechanism as `start`: configured URLs, or the embedded PostgreSQL and Redis. Builds the
 * migrated template database each test file clones. test/run.ts calls this once and passes the
 * result on in TEST_* variables; a file run alone with `bun test` calls it itself.
 */
export async function startTestServices(log?: (m: string) => void): Promise<TestServices> {
  const config = loadConfig({
    ...process.env,
    DATA_DIR: process.env.DATA_DIR ?? resolve(import.meta.dir, '../../.data'),
  });
  const db = await resolveDatabaseUrl(config, log);
  const redis = await resolveRedisUrl(config, log);
  const adminUrl = withDatabase(db.url, 'postgres');
  // A Citus database is a cluster of its own: its template is one on every node, built by the first
  // test database (test/helpers/db.ts clusterTemplate); one PostgreSQL's is built here.
  const citusWorkers = config.citusWorkers ? await citusWorkerUrls(db.url, 'postgres') : [];
  if (!citusWorkers.length) await ensureTemplate(adminUrl);
  return {
    adminUrl,
    redisUrl: redis.url,
    citusWorkers,
    async stop() {
      await redis.stop();
      await db.stop();
    },
  };
}

/** Builds the template under a temporary name and renames it into place, so it appears complete. */
async function ensureTemplate(adminUrl: string): Promise<void> {
  const admin = connect(adminUrl, 1);
  try {
    const [exists] = await admin`select 1 from pg_database where datname = ${TEMPLATE_DB}`;
    if (exists) return;
    const building = `${TEMPLATE_DB}_b${process.pid}`;
    await admin.unsafe(`drop database if exists ${building}`);
    await admin.unsafe(`create database ${building}`);
    const template = connect(withDatabase(adminUrl, building), 1);
    try {
      await migrate(template);
    } finally {
      await template.end();
    }
    try {
      await admin.unsafe(`alter database ${building} rename to ${TEMPLATE_DB}`);
    } catch {
      // Another run finished the same template first.
      await admin.unsafe(`drop database if exists ${building}`);
    }
  } finally {
    await admin.end();
  }
}

type SharedServices = Pick<TestServices, 'adminUrl' | 'redisUrl' | 'citusWorkers'>;
let shared: Promise<SharedServices> | undefined;

/** The TEST_* variables test/run.ts passes its `bun test` for `services`. */
export function testServicesEnv(services: SharedServices): Record<string, string> {
  return {
    TEST_ADMIN_DATABASE_URL: services.adminUrl,
    TEST_REDIS_URL: services.redisUrl,
    TEST_CITUS_WORKERS: services.citusWorkers.join(' '),
  };
}

/** Services for this test process: from test/run.ts's environment, or started here. */
export function testServices(): Promise<SharedServices> {
  const { TEST_ADMIN_DATABASE_URL: adminUrl, TEST_REDIS_URL: redisUrl, TEST_CITUS_WORKERS: workers } = process.env;
  if (adminUrl && redisUrl) {
    return Promise.resolve({ adminUrl, redisUrl, citusWorkers: (workers ?? '').split(' ').filter(Boolean) });
  }
  shared ??= startTestServices();
  return shared;
}

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadConfig } from '../../src/config';
import { connect } from '../../src/db';
import { migrate } from '../../src/migrate';
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
  /** URL of the server's maintenance database, for CREATE/DROP DATABASE. */
  adminUrl: string;
  redisUrl: string;
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
  await ensureTemplate(adminUrl);
  return {
    adminUrl,
    redisUrl: redis.url,
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

let shared: Promise<{ adminUrl: string; redisUrl: string }> | undefined;

/** Services for this test process: from test/run.ts's environment, or started here. */
export function testServices(): Promise<{ adminUrl: string; redisUrl: string }> {
  if (process.env.TEST_ADMIN_DATABASE_URL && process.env.TEST_REDIS_URL) {
    return Promise.resolve({ adminUrl: process.env.TEST_ADMIN_DATABASE_URL, redisUrl: process.env.TEST_REDIS_URL });
  }
  shared ??= startTestServices();
  return shared;
}

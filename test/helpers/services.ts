import { resolve } from 'node:path';
import { loadConfig } from '../../src/config';
import { connect } from '../../src/db';
import { migrate } from '../../src/migrate';
import { resolveDatabaseUrl, resolveRedisUrl } from '../../src/cli/local/urls';

export const TEMPLATE_DB = 'contacts_test_template';

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
  const config = loadConfig({ ...process.env, DATA_DIR: process.env.DATA_DIR ?? resolve(import.meta.dir, '../../.data') });
  const db = await resolveDatabaseUrl(config, log);
  const redis = await resolveRedisUrl(config, log);
  const adminUrl = withDatabase(db.url, 'postgres');
  const admin = connect(adminUrl, 1);
  try {
    await admin.unsafe(`drop database if exists ${TEMPLATE_DB} with (force)`);
    await admin.unsafe(`create database ${TEMPLATE_DB}`);
  } finally {
    await admin.end();
  }
  const template = connect(withDatabase(db.url, TEMPLATE_DB), 1);
  try {
    await migrate(template);
  } finally {
    await template.end();
  }
  return {
    adminUrl,
    redisUrl: redis.url,
    async stop() {
      await redis.stop();
      await db.stop();
    },
  };
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

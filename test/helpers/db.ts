import type { Sql } from '../../src/db';
import { connect } from '../../src/db';
import { TEMPLATE_DB, testServices, withDatabase } from './services';

export interface TestDatabase {
  url: string;
  sql: Sql;
  redisUrl: string;
  drop(): Promise<void>;
}

/** A fresh, migrated database cloned from the template: each test file gets its own. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const { adminUrl, redisUrl } = await testServices();
  const name = `test_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const admin = connect(adminUrl, 1);
  try {
    await admin.unsafe(`create database ${name} template ${TEMPLATE_DB}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  const sql = connect(url, 10);
  return {
    url,
    sql,
    redisUrl,
    async drop() {
      await sql.end({ timeout: 2 });
      const a = connect(adminUrl, 1);
      try {
        await a.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await a.end();
      }
    },
  };
}

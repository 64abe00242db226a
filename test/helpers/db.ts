import type { Sql } from '../../src/db';
import { connect } from '../../src/db';
import { formCluster } from '../../src/embedded/citus';
import { migrate } from '../../src/migrate';
import { TEMPLATE_DB, testServices, withDatabase } from './services';

export interface TestDatabase {
  url: string;
  sql: Sql;
  redisUrl: string;
  drop(): Promise<void>;
}

/** Runs one statement on the server of `adminUrl`'s maintenance database. */
export async function onServer(adminUrl: string, statement: string): Promise<void> {
  const admin = connect(adminUrl, 1);
  try {
    await admin.unsafe(statement);
  } finally {
    await admin.end();
  }
}

/**
 * A fresh, migrated database: each test file gets its own. Cloned from the template on one
 * PostgreSQL; on a Citus cluster made on every node, formed into a cluster and migrated (which
 * distributes its tables).
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const { adminUrl, redisUrl, citusWorkers } = await testServices();
  const name = `test_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const url = withDatabase(adminUrl, name);
  if (citusWorkers.length) {
    await Promise.all([adminUrl, ...citusWorkers].map((u) => onServer(u, `create database ${name}`)));
    const port = (u: string) => Number(new URL(u).port);
    await formCluster(port(adminUrl), citusWorkers.map(port), () => {}, name);
    const setup = connect(url, 1);
    try {
      await migrate(setup);
    } finally {
      await setup.end();
    }
  } else {
    await onServer(adminUrl, `create database ${name} template ${TEMPLATE_DB}`);
  }
  const sql = connect(url, 10);
  return {
    url,
    sql,
    redisUrl,
    async drop() {
      await sql.end({ timeout: 2 });
      for (const u of [adminUrl, ...citusWorkers]) await onServer(u, `drop database if exists ${name} with (force)`);
    },
  };
}

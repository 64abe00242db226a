import type { Sql } from '../../src/db';
import { connect } from '../../src/db';
import { formCluster } from '../../src/embedded/citus';
import { migrate } from '../../src/migrate';
import { TEMPLATE_DB, testServices, withDatabase } from './services';

export interface TestDatabase {
  url: string;
  /** On a Citus cluster: this database on each worker, in port order (API replicas may connect to any node). */
  workerUrls: string[];
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
 * Drops database `name` on every server of `adminUrls`. A Citus node can hold a prepared
 * transaction of that database (a shard move's or a killed statement's two-phase commit, which the
 * coordinator's recovery would settle within a minute); it blocks the drop even with `force`, so
 * the drop rolls those back first: the database and its rows are going anyway.
 */
export async function dropDatabase(adminUrls: string[], name: string): Promise<void> {
  for (const adminUrl of adminUrls) {
    const exists = connect(adminUrl, 1);
    const found = await exists`select 1 from pg_database where datname = ${name}`.finally(() => exists.end());
    if (!found.length) continue;
    const db = connect(withDatabase(adminUrl, name), 1);
    try {
      const prepared = await db<{ gid: string }[]>`
        select gid from pg_prepared_xacts where database = current_database()`;
      for (const { gid } of prepared) await db.unsafe(`rollback prepared '${gid.replaceAll("'", "''")}'`);
    } finally {
      await db.end();
    }
    // `force` ends the sessions it finds; one that connects in the moment after (a Citus node's
    // connection from a backend still closing) fails the drop with 55006: try again, briefly.
    for (let attempt = 0; ; attempt++) {
      try {
        await onServer(adminUrl, `drop database if exists ${name} with (force)`);
        break;
      } catch (e) {
        if ((e as { code?: string }).code !== '55006' || attempt >= 10) throw e;
        await Bun.sleep(200);
      }
    }
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
    workerUrls: citusWorkers.map((u) => withDatabase(u, name)),
    sql,
    redisUrl,
    async drop() {
      await sql.end({ timeout: 2 });
      await dropDatabase([adminUrl, ...citusWorkers], name);
    },
  };
}

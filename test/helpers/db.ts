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
 * A fresh, migrated database: each test file gets its own, cloned from the migrated template: on one
 * PostgreSQL the template's database; on a Citus cluster each node's own part of the cluster's
 * template (clusterTemplate), which together are again a cluster of their own.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const { adminUrl, redisUrl, citusWorkers } = await testServices();
  const name = `test_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const url = withDatabase(adminUrl, name);
  if (citusWorkers.length) {
    const template = await clusterTemplate(adminUrl, citusWorkers);
    await Promise.all([adminUrl, ...citusWorkers].map((u) => cloneDatabase(u, template, name)));
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

/** This process's cluster template, built or found once. */
let clusterTemplateMade: Promise<string> | undefined;

/**
 * The migrated template of a Citus cluster: a database of that name on every node, formed into a
 * cluster and migrated (which distributes its tables), closed to connections once complete. A node's
 * copy of its part (CREATE DATABASE … TEMPLATE) is that node's part of a new cluster: the nodes it
 * names (pg_dist_node) are the same, and Citus reaches a worker through the database of the
 * coordinator's name. Forming and migrating a cluster per test file took 6-7 s; a copy takes under
 * 1 s. Named by the migrations and the nodes' ports, which its metadata holds.
 */
function clusterTemplate(adminUrl: string, citusWorkers: string[]): Promise<string> {
  clusterTemplateMade ??= ensureClusterTemplate(adminUrl, citusWorkers).catch((e: unknown) => {
    clusterTemplateMade = undefined;
    throw e;
  });
  return clusterTemplateMade;
}

async function ensureClusterTemplate(adminUrl: string, citusWorkers: string[]): Promise<string> {
  const nodes = [adminUrl, ...citusWorkers];
  const port = (u: string) => Number(new URL(u).port);
  const name = `${TEMPLATE_DB}_c${nodes.map(port).join('_')}`.slice(0, 63);
  const admin = connect(adminUrl, 1);
  try {
    // One builder at a time: a concurrent run on the same cluster waits, then finds it complete.
    await admin.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(hashtext(${name}))`;
      const states = await Promise.all(nodes.map((u) => templateState(u, name)));
      if (states.every((s) => s === 'complete')) return;
      // A build a killed run left half way: opened again, so that it can be dropped.
      for (const [k, u] of nodes.entries())
        if (states[k] === 'complete') await onServer(u, `alter database ${name} allow_connections true`);
      await dropDatabase(nodes, name);
      await Promise.all(nodes.map((u) => onServer(u, `create database ${name}`)));
      await formCluster(port(adminUrl), citusWorkers.map(port), () => {}, name);
      const setup = connect(withDatabase(adminUrl, name), 1);
      try {
        await migrate(setup);
      } finally {
        await setup.end();
      }
      // Closed last: a template that takes no connection is complete, and no session (Citus's
      // maintenance daemon among them) holds it when a test file copies it.
      for (const u of nodes) {
        await onServer(u, `alter database ${name} allow_connections false`);
        await endSessions(u, name);
      }
    });
  } finally {
    await admin.end();
  }
  return name;
}

/** Whether `name` exists on the server of `adminUrl`, and is complete (closed to connections). */
async function templateState(adminUrl: string, name: string): Promise<'missing' | 'building' | 'complete'> {
  const admin = connect(adminUrl, 1);
  try {
    const [row] = await admin<
      { open: boolean }[]
    >`select datallowconn as open from pg_database where datname = ${name}`;
    return row === undefined ? 'missing' : row.open ? 'building' : 'complete';
  } finally {
    await admin.end();
  }
}

async function endSessions(adminUrl: string, name: string): Promise<void> {
  const admin = connect(adminUrl, 1);
  try {
    await admin`
      select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name} and pid <> pg_backend_pid()`;
  } finally {
    await admin.end();
  }
}

/**
 * CREATE DATABASE `name` TEMPLATE `template` on the server of `adminUrl`, a Citus node. A session
 * still on the template (a Citus daemon closing) refuses the copy with 55006: ended, and the copy
 * tried again. The copy holds everything of the template but its own identity: Citus records the
 * database among its distributed objects by OID (pg_dist_object), which would still name the
 * template, and a node added later (test/cluster/rebalance.test.ts) would be asked for that database.
 */
async function cloneDatabase(adminUrl: string, template: string, name: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await onServer(adminUrl, `create database ${name} template ${template}`);
      break;
    } catch (e) {
      if ((e as { code?: string }).code !== '55006' || attempt >= 10) throw e;
      await endSessions(adminUrl, template);
      await Bun.sleep(200);
    }
  }
  const db = connect(withDatabase(adminUrl, name), 1);
  try {
    await db`
      update pg_catalog.pg_dist_object
      set objid = (select oid from pg_database where datname = current_database())
      where classid = 'pg_database'::regclass and objid = (select oid from pg_database where datname = ${template})`;
  } finally {
    await db.end();
  }
}

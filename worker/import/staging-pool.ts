import { type AnySql, type Sql, stagingPoolLock } from '../../src/db';
import { log } from '../../src/log';
import { runLoop, type Loop } from '../events/loop';
import { rejectsTableDdl, repeatRowsDdl } from './rejects';
import { repeatsTableDdl } from './repeats';
import {
  distributeStaging,
  emptyTables,
  mergePartDdl,
  onCluster,
  ownStaging,
  planTableDdl,
  rowsTableDdl,
  SESSION_ACCOUNT,
  stagedRowTables,
  stagingTables,
  type Staging,
  type StagingTables,
} from './staging';

/**
 * The staging pool of a Citus cluster: sets of staging tables (staging.ts), each distributed like
 * the contacts, made ahead by the workers' upkeep (startStagingPool) and claimed by one import at
 * a time (stagingFor), which empties them when it ends (releaseStaging). Its table, staging_sets
 * (migration 0015), is a reference table; a set's tables are named for the set's id as an import's
 * own are named for the import's.
 *
 * Why: making a distributed table of 32 shards takes a cluster about a second and dropping it half
 * a second, and an import made and dropped eight, so a 4-row import took 14 s from its PUT to
 * `success` (a single PostgreSQL: 0.23 s). Emptying a set takes one TRUNCATE.
 *
 * What an import relies on stays as it was: a set is the import's alone from its claim to its end,
 * and its claim is recorded, so a run after a kill finds its rows where the last left them; the
 * tables are UNLOGGED as before (a crash empties them and the import reads its file again); they
 * are colocated with the contacts, so a rebalance moves them with the account's shards and every
 * statement of the dedupe and the merge still runs whole on the account's node.
 */

/**
 * The layout of a set's tables (setDdl): raised with any change to them. Sets of another layout are
 * never claimed and are dropped once free, so workers of two versions can share the pool. A set an
 * import holds is brought to this layout when a worker of this version runs the import (toLayout):
 * an import is not handed back to an older worker after that, as in any upgrade that goes forward.
 */
export const LAYOUT = 3; // 3: the plan tables' tally columns (staging.ts planTableDdl)

/** Every table of a set with the DDL that makes it (each `if not exists`), in the order they are made. */
function setDdl(t: StagingTables): [table: string, ddl: string][] {
  return [
    [t.rows, rowsTableDdl(t.rows, SESSION_ACCOUNT)[0]!],
    [t.repeats, repeatsTableDdl(t.repeats)],
    [t.repeatRows, repeatRowsDdl(t.repeatRows)],
    ...t.parts.flatMap((part): [string, string][] => [
      [part.table, mergePartDdl(part.table, true)],
      [part.plan, planTableDdl(part.plan)],
    ]),
    [t.rejects, rejectsTableDdl(t.rejects)],
  ];
}

function allTables(t: StagingTables): string[] {
  return [...stagedRowTables(t), t.rejects];
}

function pooled(setId: string, accountId: string): Staging {
  return { tables: stagingTables(setId), pooled: true, accountId };
}

/**
 * The staging of an import's run: on plain PostgreSQL its own tables; on a cluster the set it
 * holds, or else a free one it claims now, or else (the pool is empty: more imports at once than
 * the upkeep made sets for) a set made for it now, at the old cost.
 *
 * Sets are made only under the upkeep's lock, by the upkeep or by an import that found none free:
 * two makers at once slow each other down (each table's distribution takes Citus's colocation
 * lock), and a worker's first imports, started while its upkeep made the pool's first sets, made
 * their own beside it (a 4-row import then took 9.8 s,
 * bench/findings/2026-11-28-small-imports-on-cluster.md). So an import
 * that finds no free set while another holds the lock waits for one that it makes, and one that
 * gets the lock makes its own.
 */
export async function stagingFor(sql: Sql, job: { id: string; accountId: string }): Promise<Staging> {
  if (!(await onCluster(sql))) return ownStaging(job.id, job.accountId);
  const [held] = await sql<{ id: string; ready: boolean; layout: number }[]>`
    select id, ready, layout from staging_sets where import_id = ${job.id}::uuid`;
  if (held) {
    if (held.layout !== LAYOUT) await toLayout(sql, held.id);
    if (!held.ready) await makeSet(sql, held.id); // a run killed while it made the set
    return pooled(held.id, job.accountId);
  }
  for (;;) {
    const free = await claimFree(sql, job);
    if (free) return free;
    const made = await whileTending(sql, async (conn) => {
      // The maker before us may have freed or made one since.
      const freed = await claimFree(conn, job);
      if (freed) return freed;
      const id = crypto.randomUUID();
      // Recorded before its tables, so that none is ever left unrecorded; ready once they all are.
      await conn`
        insert into staging_sets (id, layout, import_id, account_id, claimed_at)
        values (${id}::uuid, ${LAYOUT}, ${job.id}::uuid, ${job.accountId}::uuid, now())`;
      await makeSet(sql, id);
      return pooled(id, job.accountId);
    });
    if (made) return made;
    await Bun.sleep(MAKER_WAIT_MS);
  }
}

/**
 * A set held over an upgrade (its import begun by an older worker, resumed by this one) brought to
 * this LAYOUT, rows kept. Free sets of another layout are dropped instead (tendPool). Layout 1's
 * rows table held the attributes as jsonb; layouts 1 and 2's plan tables lacked the tally columns.
 */
async function toLayout(sql: AnySql, id: string): Promise<void> {
  const { rows } = stagingTables(id);
  const [column] = await sql<{ type: string }[]>`
    select format_type(atttypid, atttypmod) as type from pg_attribute
    where attrelid = to_regclass(${rows}) and attname = 'attributes' and not attisdropped`;
  if (column?.type === 'jsonb')
    await sql.unsafe(`alter table ${rows} alter column attributes type text using attributes::text`);
  for (const { plan } of stagingTables(id).parts)
    await sql.unsafe(`alter table ${plan} add column if not exists dropped_brand_ids uuid[],
                        add column if not exists reenabled boolean not null default false`);
  await sql`update staging_sets set layout = ${LAYOUT} where id = ${id}::uuid`;
}

/** How often an import waiting on another maker looks for a free set (a set takes seconds to make). */
const MAKER_WAIT_MS = 200;

/** A free set claimed for the import, or undefined when none is free. */
async function claimFree(sql: AnySql, job: { id: string; accountId: string }): Promise<Staging | undefined> {
  for (;;) {
    // A few candidates in random order: claims of several imports at once rarely meet.
    const free = await sql<{ id: string }[]>`
      select id from staging_sets where import_id is null and ready and layout = ${LAYOUT}
      order by random() limit 4`;
    if (free.length === 0) return undefined;
    for (const { id } of free) {
      const taken = await sql`
        update staging_sets set import_id = ${job.id}::uuid, account_id = ${job.accountId}::uuid, claimed_at = now()
        where id = ${id}::uuid and import_id is null and ready and layout = ${LAYOUT}`;
      if (taken.count === 1) return pooled(id, job.accountId);
    }
  }
}

/**
 * `fn` on a connection of its own holding the pool's lock (stagingPoolLock, one holder in the
 * cluster: the upkeep of one process, or an import making its set), or undefined at once when
 * another holds it.
 */
async function whileTending<T>(sql: Sql, fn: (conn: AnySql) => Promise<T>): Promise<T | undefined> {
  const conn = await sql.reserve();
  try {
    const [lock] = await conn<{ locked: boolean }[]>`select pg_try_advisory_lock(${stagingPoolLock(conn)}) as locked`;
    if (!lock?.locked) return undefined;
    try {
      return await fn(conn);
    } finally {
      await conn`select pg_advisory_unlock(${stagingPoolLock(conn)})`.catch(() => {});
    }
  } finally {
    conn.release();
  }
}

/**
 * Makes whatever tables of set `id` are missing and marks it ready, in one transaction on the pool
 * (`sql`; the caller may hold the upkeep's lock on a connection of its own): Citus distributes the
 * tables of one transaction at about a third of their cost one by one (8 tables: about 0.9 s
 * against 2.4 s on an idle cluster of 2 workers), and a set is then made whole or not at all.
 */
async function makeSet(sql: Sql, id: string): Promise<void> {
  await sql.begin(async (tx) => {
    for (const [table, ddl] of setDdl(stagingTables(id))) {
      await tx.unsafe(ddl);
      await distributeStaging(tx, table);
    }
    await tx`update staging_sets set ready = true where id = ${id}::uuid`;
  });
}

/** Whether an import holds a set now (of any worker of the cluster): one read of a reference table. */
async function importsRunning(sql: AnySql): Promise<boolean> {
  const [row] = await sql<{ held: boolean }[]>`
    select exists (select from staging_sets where import_id is not null) as held`;
  return row?.held === true;
}

/**
 * After an import ended: its staging let go. Its own tables are dropped (on a cluster too: those of
 * an import begun before the pool); its set, if it has one, is emptied and freed, or dropped when
 * the pool already holds `keep` × 2 free sets. Idempotent.
 */
export async function releaseStaging(sql: Sql, importId: string, keep: number): Promise<void> {
  await sql.unsafe(`drop table if exists ${allTables(stagingTables(importId)).join(', ')}`);
  if (!(await onCluster(sql))) return;
  const [held] = await sql<{ id: string; accountId: string }[]>`
    select id, account_id as "accountId" from staging_sets where import_id = ${importId}::uuid`;
  if (held) await freeSet(sql, held, importId, keep);
}

async function freeSet(
  sql: AnySql,
  { id, accountId }: { id: string; accountId: string },
  importId: string,
  keep: number,
): Promise<'freed' | 'dropped'> {
  const [{ free } = { free: 0 }] = await sql<{ free: number }[]>`
    select count(*)::int as free from staging_sets where import_id is null and ready and layout = ${LAYOUT}`;
  if (free >= 2 * keep) {
    await dropSet(sql, id);
    return 'dropped';
  }
  // Emptied first, so that a free set is always empty: no account's rows stay behind, and a claim
  // need not empty it again.
  await emptyTables(sql, allTables(stagingTables(id)), accountId);
  await sql`
    update staging_sets set import_id = null, account_id = null, claimed_at = null
    where id = ${id}::uuid and import_id = ${importId}::uuid`;
  return 'freed';
}

/**
 * Drops set `id`: first marked of no layout and free, so that no one claims it, then its tables,
 * then its row. Killed half way, the upkeep finishes it (tendPool).
 */
async function dropSet(sql: AnySql, id: string): Promise<void> {
  await sql`
    update staging_sets set layout = 0, import_id = null, account_id = null, claimed_at = null
    where id = ${id}::uuid`;
  await sql.unsafe(`drop table if exists ${allTables(stagingTables(id)).join(', ')}`);
  await sql`delete from staging_sets where id = ${id}::uuid`;
}

/** What one pass of the upkeep did, for the log. */
export interface PoolUpkeep {
  /** sets held by imports that had ended (their run's cleanup did not get to them), now freed */
  freed: number;
  /** free sets of another layout (or half dropped), now dropped */
  dropped: number;
  /** sets made (or finished) ahead of the imports */
  made: number;
}

/**
 * One pass of the pool's upkeep, on a cluster, by one process at a time (an advisory lock; a
 * process that does not get it does nothing): frees the sets of imports that ended, drops sets no
 * longer of this layout, and makes sets until there are `keep`, free or in use (an import that finds
 * none free makes its own, and frees it after). With `giveWay` (the upkeep's loop) it makes a set
 * only while no import runs (importsRunning), and goes on at a later pass: making one takes a
 * second of Citus DDL on every node, which an import beside it waits for. Undefined when it did
 * not run.
 */
export async function tendPool(sql: Sql, keep: number, giveWay = false): Promise<PoolUpkeep | undefined> {
  if (!(await onCluster(sql))) return undefined;
  return whileTending(sql, async (conn) => {
    const done: PoolUpkeep = { freed: 0, dropped: 0, made: 0 };
    for (const set of await endedHolders(conn)) {
      if ((await freeSet(conn, set, set.importId, keep)) === 'freed') done.freed++;
      else done.dropped++;
    }
    const unusable = await conn<{ id: string }[]>`
      select id from staging_sets where import_id is null and layout <> ${LAYOUT}`;
    for (const { id } of unusable) await dropSet(conn, id);
    done.dropped += unusable.length;
    // Half made by an upkeep that was killed: finished.
    const unfinished = await conn<{ id: string }[]>`
      select id from staging_sets where import_id is null and not ready and layout = ${LAYOUT}`;
    for (const { id } of unfinished) {
      if (giveWay && (await importsRunning(conn))) return done;
      await makeSet(sql, id);
      done.made++;
    }
    // Sets in use count: the pool is as big as the imports that may run at once, not bigger.
    const [{ total } = { total: 0 }] = await conn<{ total: number }[]>`
      select count(*)::int as total from staging_sets where layout = ${LAYOUT}`;
    for (let n = total; n < keep; n++) {
      if (giveWay && (await importsRunning(conn))) return done;
      const id = crypto.randomUUID();
      await conn`insert into staging_sets (id, layout) values (${id}::uuid, ${LAYOUT})`;
      await makeSet(sql, id);
      done.made++;
    }
    return done;
  });
}

/**
 * Sets held by an import that is final or gone, claimed over a minute ago (a run's cleanup frees
 * its set right after the import ends; this is for a run killed in between).
 */
async function endedHolders(sql: AnySql): Promise<{ id: string; importId: string; accountId: string }[]> {
  const held = await sql<{ id: string; importId: string; accountId: string }[]>`
    select id, import_id as "importId", account_id as "accountId" from staging_sets
    where import_id is not null and claimed_at < now() - interval '1 minute'`;
  const ended: { id: string; importId: string; accountId: string }[] = [];
  for (const set of held) {
    // One import at a time, by its account: a statement Citus routes to the account's node.
    const [row] = await sql<{ status: string }[]>`
      select status from contact_imports where account_id = ${set.accountId}::uuid and id = ${set.importId}::uuid`;
    if (!row || row.status === 'success' || row.status === 'failed') ended.push(set);
  }
  return ended;
}

/**
 * Resolves once the pool holds `keep` sets of this layout (at once on plain PostgreSQL, and on a
 * cluster whose pool was made before): made here under the upkeep's lock, or waited for while
 * another process makes them. A worker takes no import before (worker/index.ts), and `npm start`
 * says the stack is up only after: on a fresh cluster the first 4-row imports, finding no set
 * while the upkeep made the pool, took 7.8-18.0 s instead of about 1.4 s (issue 59); made first,
 * the pool costs a fresh start a few seconds, once.
 */
export async function stagingPoolMade(sql: Sql, keep: number): Promise<void> {
  if (!(await onCluster(sql))) return;
  for (;;) {
    const [{ n } = { n: 0 }] = await sql<{ n: number }[]>`
      select count(*)::int as n from staging_sets where ready and layout = ${LAYOUT}`;
    if (n >= keep) return;
    if (!(await tendPool(sql, keep))) await Bun.sleep(MAKER_WAIT_MS);
  }
}

/** How often the upkeep looks at the pool. */
const UPKEEP_MS = 5_000;

/**
 * The pool's upkeep in a worker process (tendPool every few seconds; nothing on plain PostgreSQL),
 * keeping `keep` sets: the worker's WORKER_CONCURRENCY, as many as it runs imports at once.
 */
export function startStagingPool(sql: Sql, keep: number): Loop {
  return runLoop('staging pool upkeep', UPKEEP_MS, async () => {
    const done = await tendPool(sql, keep, true);
    if (done && done.freed + done.dropped + done.made > 0) log('info', 'staging pool tended', { ...done });
    return false;
  });
}

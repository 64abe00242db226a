/**
 * `bun run admin citus distribute` as an operator runs it on a database that was migrated and used on
 * one PostgreSQL and got Citus later: the tables are distributed in place, with their rows, and the
 * service's reads and writes go on as before.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { connect, type Sql } from '../../src/db';
import { formCluster } from '../../src/embedded/citus';
import { migrate } from '../../src/migrate';
import { contactStats } from '../../src/search/stats';
import { runAdmin } from '../helpers/admin-cli';
import { dropDatabase, onServer } from '../helpers/db';
import { createAccount, createBrand } from '../helpers/fixtures';
import { testServices, withDatabase } from '../helpers/services';

const name = `test_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`;
let nodes: string[] = [];
let url = '';
let sql: Sql;

const admin = (...args: string[]) => runAdmin(url, args);

beforeAll(async () => {
  const { adminUrl, citusWorkers } = await testServices();
  if (!citusWorkers.length) throw new Error('test/cluster/ runs on a Citus cluster: CITUS_WORKERS=2 bun test/run.ts');
  nodes = [adminUrl, ...citusWorkers];
  await Promise.all(nodes.map((u) => onServer(u, `create database ${name}`)));
  url = withDatabase(adminUrl, name);
  sql = connect(url, 4);
  // Migrated and used as one PostgreSQL: no citus extension yet.
  await migrate(sql);
}, 60_000);

afterAll(async () => {
  await sql?.end({ timeout: 2 });
  await dropDatabase(nodes, name);
});

test('a database used on one PostgreSQL is distributed in place, with its rows', async () => {
  const account = await createAccount(sql);
  const brand = await createBrand(sql, account, 'Before');
  await sql`
    insert into contacts (account_id, email_md5, email, brand_ids, first_source)
    select ${account}, md5('c' || n || '@example.com')::uuid, 'c' || n || '@example.com', array[${brand}::uuid], 'api'
    from generate_series(1, 1000) n`;

  // Without Citus in the database: refused, saying how to get it.
  const before = await admin('citus', 'distribute');
  expect(before.code).toBe(1);
  expect(before.err).toMatch(/citus extension is not installed.*create extension citus/);

  const port = (u: string) => Number(new URL(u).port);
  await formCluster(port(nodes[0]!), nodes.slice(1).map(port), () => {}, name);
  const { out, err, code } = await admin('citus', 'distribute');
  expect({ code, err }).toEqual({ code: 0, err: '' });
  const result = JSON.parse(out) as { workers: number; tables: { table: string; method: string }[] };
  expect(result.workers).toBe(nodes.length - 1);
  const methods = Object.fromEntries(result.tables.map((t) => [t.table, t.method]));
  expect(methods).toMatchObject({
    accounts: 'n',
    api_keys: 'n',
    cache_versions: 'n',
    contacts: 'h',
    brands: 'h',
    contact_imports: 'h',
    contact_exports: 'h',
    contact_erasures: 'h',
    brand_subscribe_events: 'h',
    event_feed_heads: 'h',
    webhook_endpoints: 'h',
  });

  // The rows are the same, now on the worker of the account's shards.
  const [count] = await sql<{ n: number }[]>`select count(*)::int as n from contacts where account_id = ${account}`;
  expect(count!.n).toBe(1000);
  const [shards] = await sql<{ n: number }[]>`
    select sum(result::int)::int as n from run_command_on_shards('contacts', 'select count(*) from %s')`;
  expect(shards!.n).toBe(1000);
  // Not left behind in the coordinator's own table either.
  const [local] = await sql<{ bytes: number }[]>`select pg_relation_size('contacts')::int as bytes`;
  expect(local!.bytes).toBe(0);

  // The write-lock functions the writes call on the node of the account's shards are on every worker.
  const functions = await sql<{ result: string }[]>`
    select result from run_command_on_workers($$
      select string_agg(proname, ',' order by proname) from pg_proc
      where proname in ('contact_write_lock', 'contact_write_ok', 'account_bulk_lock')$$)`;
  expect(functions.map((f) => f.result)).toEqual(
    nodes.slice(1).map(() => 'account_bulk_lock,account_bulk_lock,contact_write_lock,contact_write_ok'),
  );
  // In their Citus form (migration 0010): the create's guard stable, so that Citus pushes it down.
  const forms = await sql<{ result: string }[]>`
    select result from run_command_on_all_nodes($$
      select string_agg(proname || ':' || provolatile::text, ',' order by proname) from pg_proc
      where proname in ('contact_write_lock', 'contact_write_ok')$$)`;
  expect(forms.map((f) => f.result)).toEqual(nodes.map(() => 'contact_write_lock:v,contact_write_ok:s'));

  // The fast path's checks (migrations 0017, 0018) in their Citus form on every node: the writes'
  // labelled immutable (called with a column of the row), each table read through its reference
  // shard there.
  const checks = await sql<{ result: string }[]>`
    select result from run_command_on_all_nodes($$
      select string_agg(proname || '/' || pronargs || ':' || provolatile::text || ':' ||
                        (prosrc !~ '(cache_versions|bulk_operations|seed_addresses)(?!_[0-9])')::text,
                        ',' order by proname, pronargs) from pg_proc
      where proname in ('contact_versions', 'contact_write_admitted', 'contact_create_admitted',
                        'contact_write_lock_here', 'account_bulk_lock')$$)`;
  expect(checks.map((f) => f.result)).toEqual(
    nodes.map(
      () =>
        'account_bulk_lock/2:v:true,account_bulk_lock/3:v:true,contact_create_admitted/4:i:true,' +
        'contact_versions/1:s:true,contact_write_admitted/5:i:true,contact_write_lock_here/1:v:true',
    ),
  );

  // The contact tallies (migration 0019) distributed with their rows, and kept by the triggers in
  // their Citus form, which append to the account's shard on its node.
  expect(await contactStats(sql, account)).toEqual({
    total: 1000,
    enabled: 1000,
    disabled: 0,
    brands: [{ brandId: brand, count: 1000 }],
  });
  await sql`update contacts set enabled = false where account_id = ${account} and email = 'c1@example.com'`;
  await sql`delete from contacts where account_id = ${account} and email = 'c2@example.com'`;
  expect(await contactStats(sql, account)).toEqual({
    total: 999,
    enabled: 998,
    disabled: 1,
    brands: [{ brandId: brand, count: 999 }],
  });

  // Run again: nothing to do, the same answer.
  const again = await admin('citus', 'distribute');
  expect({ code: again.code, err: again.err }).toEqual({ code: 0, err: '' });
  expect(JSON.parse(again.out)).toEqual(result);
}, 120_000);

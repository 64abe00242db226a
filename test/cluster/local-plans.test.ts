/**
 * A prepared statement of one account run again and again on the node that holds the account's
 * shard, as an API replica connected to that worker runs it (docs/scaling-out.md), keeps its
 * backend's memory flat. Citus 13.2.2 as released planned the shard query anew on every execution
 * and kept every plan, 33 KB each (src/embedded/citus.ts, reuseLocalPlans, fixes the build).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { connect, type Sql } from '../../src/db';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { createAccount } from '../helpers/fixtures';

let db: TestDatabase;
let local: Sql;
let account: string;

beforeAll(async () => {
  db = await createTestDatabase();
  account = await createAccount(db.sql, 'local plans');
  const [home] = await db.sql<{ port: number }[]>`
    select nodeport as port from citus_shards
    where table_name = 'contacts'::regclass
      and shardid = get_shard_id_for_distribution_column('contacts', ${account}::uuid)`;
  const url = db.workerUrls.find((u) => Number(new URL(u).port) === home!.port);
  if (!url) throw new Error(`no worker URL for the account's node (port ${home!.port}) among ${db.workerUrls}`);
  local = connect(url, 1);
});

afterAll(async () => {
  await local?.end({ timeout: 2 });
  await db?.drop();
});

const memory = async () =>
  Number(
    (await local<{ bytes: string }[]>`select sum(total_bytes)::int8 as bytes from pg_backend_memory_contexts`)[0]!
      .bytes,
  );

test("2,000 executions of a prepared one-shard read on the account's node grow its backend under 1 MB", async () => {
  const nobody = '00000000-0000-0000-0000-000000000000';
  const read = () => local`select email from contacts where account_id = ${account} and email_md5 = ${nobody}`;
  // Past PostgreSQL's five custom plans: the generic plan, whose shard Citus picks per execution.
  for (let i = 0; i < 20; i++) await read();
  const before = await memory();
  for (let i = 0; i < 2_000; i++) await read();
  const grown = (await memory()) - before;
  expect({ grownBytes: grown, flat: grown < 1 << 20 }).toMatchObject({ flat: true });
});

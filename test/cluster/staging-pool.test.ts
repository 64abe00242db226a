/**
 * The staging pool's makers (worker/import/staging-pool.ts), on a Citus cluster: sets are made only
 * under the pool's lock. An import that finds no free set while another holds the lock waits for a
 * set that one makes free, and makes none of its own; with the lock free it makes its own, holding
 * the lock while it does.
 */
import { beforeAll, expect, test } from 'bun:test';
import { stagingPoolLock } from '../../src/db';
import { LAYOUT, releaseStaging, stagingFor, tendPool } from '../../worker/import/staging-pool';
import { stagingTables } from '../../worker/import/staging';
import { createAccount } from '../helpers/fixtures';
import { importBed } from '../helpers/import-bed';

const bed = importBed();

beforeAll(async () => {
  const [citus] = await bed.db.sql`select 1 from pg_extension where extname = 'citus'`;
  if (!citus) throw new Error('test/cluster/ runs on a Citus cluster: CITUS_WORKERS=2 bun test/run.ts test/cluster');
});

test('none free: an import waits for the set another maker frees, makes its own only under the lock', async () => {
  const sql = bed.db.sql;
  const account = await createAccount(sql);
  const setCount = async () => (await sql<{ n: number }[]>`select count(*)::int as n from staging_sets`)[0]!.n;
  const heldBy = async (importId: string) => [
    ...(await sql<
      { id: string; ready: boolean }[]
    >`select id, ready from staging_sets where import_id = ${importId}::uuid`),
  ];

  // At least one set, then every free one taken by imports that are not running, so none is free.
  expect(await tendPool(sql, 1)).toBeDefined();
  const taken: { id: string }[] = [];
  for (const { id } of await sql<{ id: string }[]>`
    select id from staging_sets where import_id is null and ready and layout = ${LAYOUT}`) {
    await sql`
      update staging_sets
      set import_id = ${crypto.randomUUID()}::uuid, account_id = ${account}::uuid, claimed_at = now()
      where id = ${id}::uuid`;
    taken.push({ id });
  }
  expect(taken.length).toBeGreaterThan(0);

  // Another maker holds the lock (the upkeep making the pool's sets, in a worker's first seconds).
  const first = { id: crypto.randomUUID(), accountId: account };
  const maker = await sql.reserve();
  try {
    await maker`select pg_advisory_lock(${stagingPoolLock(maker)})`;
    const before = await setCount();
    const claim = stagingFor(sql, first);
    await Bun.sleep(1_000);
    expect({ sets: await setCount(), held: await heldBy(first.id) }).toEqual({ sets: before, held: [] });

    // The maker frees one (as a set it made becomes ready): the waiting import claims that one.
    const given = taken[0]!.id;
    await maker`
      update staging_sets set import_id = null, account_id = null, claimed_at = null where id = ${given}::uuid`;
    expect((await claim).tables).toEqual(stagingTables(given));
    expect(await setCount()).toBe(before);
  } finally {
    await maker`select pg_advisory_unlock(${stagingPoolLock(maker)})`;
    maker.release();
  }

  // The lock free and none free: the import makes its own set, holding the lock while it does.
  const second = { id: crypto.randomUUID(), accountId: account };
  const made = stagingFor(sql, second);
  let sawLockHeld = false;
  const probe = await sql.reserve();
  try {
    for (let i = 0; i < 600 && !sawLockHeld; i++) {
      const [row] = await heldBy(second.id);
      if (row?.ready) break;
      if (row) {
        const [{ locked } = { locked: true }] = await probe<{ locked: boolean }[]>`
          select pg_try_advisory_lock(${stagingPoolLock(probe)}) as locked`;
        if (locked) await probe`select pg_advisory_unlock(${stagingPoolLock(probe)})`;
        sawLockHeld = !locked;
      }
      await Bun.sleep(20);
    }
  } finally {
    probe.release();
  }
  const staging = await made;
  const [own] = await heldBy(second.id);
  expect({ sawLockHeld, ready: own?.ready, fresh: !taken.some((t) => t.id === own?.id) }).toEqual({
    sawLockHeld: true,
    ready: true,
    fresh: true,
  });
  expect(staging.tables).toEqual(stagingTables(own!.id));

  // Everything let go: the imports' sets emptied and freed, the placeholders' freed.
  for (const job of [first, second]) await releaseStaging(sql, job.id, 4);
  await sql`
    update staging_sets set import_id = null, account_id = null, claimed_at = null
    where id = any(${sql.array(taken.map((t) => t.id))}::uuid[])`;
  expect([...(await sql`select id from staging_sets where import_id is not null`)]).toEqual([]);
});

test('a set held over an upgrade (layout 1: jsonb attributes) is brought to this layout, rows kept', async () => {
  const sql = bed.db.sql;
  const account = await createAccount(sql);
  const job = { id: crypto.randomUUID(), accountId: account };
  const { tables } = await stagingFor(sql, job);
  // As an older worker made and filled it.
  await sql.unsafe(`alter table ${tables.rows} alter column attributes type jsonb using attributes::jsonb`);
  await sql`update staging_sets set layout = 1 where import_id = ${job.id}::uuid`;
  await sql.unsafe(
    `insert into ${tables.rows} (account_id, row_no, email_md5, email, attributes, brand_ids, attribute_count)
     values ($1::uuid, 1, md5('a@b.co')::uuid, 'a@b.co', '{"n": 1}', '{}', 1)`,
    [account],
  );

  const resumed = await stagingFor(sql, job);
  expect(resumed.tables).toEqual(tables);
  const [set] = await sql<{ layout: number }[]>`select layout from staging_sets where import_id = ${job.id}::uuid`;
  const [column] = await sql<{ type: string }[]>`
    select format_type(atttypid, atttypmod) as type from pg_attribute
    where attrelid = ${tables.rows}::regclass and attname = 'attributes'`;
  const rows = await sql.unsafe<{ attributes: string }[]>(`select attributes from ${tables.rows}`);
  expect({ layout: set?.layout, type: column?.type, rows: [...rows] }).toEqual({
    layout: LAYOUT,
    type: 'text',
    rows: [{ attributes: '{"n": 1}' }],
  });
  await releaseStaging(sql, job.id, 4);
});

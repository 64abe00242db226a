/**
 * What keeps an import's staging tables from costing more disk than their rows: none is ever
 * autovacuumed (worker/import/staging.ts, STAGING_STORAGE), and the plan tables, whose rows each
 * merge batch inserts and deletes again, are vacuumed after each batch so their pages are used
 * again (worker/import/merge/plan-vacuum.ts). Against real tables of a real server.
 */
import { expect, test } from 'bun:test';
import { PlanVacuum } from '../../worker/import/merge/plan-vacuum';
import { repeatsTableDdl } from '../../worker/import/repeats';
import { accountLiteral, mergePartDdl, planTableDdl, rowsTableDdl } from '../../worker/import/staging';
import { importBed } from '../helpers/import-bed';

const bed = importBed();

test('every staging table is made with autovacuum off, each slice of sliced staged rows too', async () => {
  const sql = bed.db.sql;
  const account = crypto.randomUUID();
  for (const statement of rowsTableDdl('storage_rows', accountLiteral(account))) await sql.unsafe(statement);
  for (const statement of rowsTableDdl('storage_sliced', accountLiteral(account), 4)) await sql.unsafe(statement);
  await sql.unsafe(mergePartDdl('storage_part'));
  await sql.unsafe(repeatsTableDdl('storage_repeats'));
  await sql.unsafe(planTableDdl('storage_plan'));

  const tables = await sql<{ relname: string; off: boolean }[]>`
    select relname, coalesce('autovacuum_enabled=false' = any (reloptions), false) as off
    from pg_class where relname like 'storage\\_%' and relkind = 'r' order by relname`;
  expect(tables.map((t) => t.relname)).toEqual([
    'storage_part',
    'storage_plan',
    'storage_repeats',
    'storage_rows',
    'storage_sliced_0',
    'storage_sliced_1',
    'storage_sliced_2',
    'storage_sliced_3',
  ]);
  for (const t of tables)
    expect({ table: t.relname, autovacuumOff: t.off }).toEqual({ table: t.relname, autovacuumOff: true });
});

/** One merge batch's use of a plan table: `rows` rows inserted and deleted in one transaction. */
async function batch(table: string, account: string, from: number, rows: number): Promise<void> {
  await bed.db.sql.begin(async (tx) => {
    await tx.unsafe(
      `insert into ${table} (account_id, seq, row_no, email_md5, email, attributes, brand_ids, assigned_brand_ids,
                             skip_reason, outcome)
       select $1::uuid, n, n, md5(n::text)::uuid, 'person' || n || '@example.com', '{"firstName": "Someone"}',
              '{}', '{}', 'unchanged', 'update'
       from generate_series($2::int8 + 1, $2::int8 + $3::int8) n`,
      [account, from, rows],
    );
    await tx.unsafe(`delete from ${table} where account_id = $1::uuid`, [account]);
  });
}

const pages = async (table: string) =>
  Number((await bed.db.sql<{ n: string }[]>`select pg_relation_size(${table}::regclass) / 8192 as n`)[0]!.n);

test('a plan table vacuumed after each batch stays about a batch big; one left alone grows every batch', async () => {
  const account = crypto.randomUUID();
  const rows = 5_000;
  const batches = 12;
  await bed.db.sql.unsafe(planTableDdl('storage_plan_vacuumed'));
  await bed.db.sql.unsafe(planTableDdl('storage_plan_alone'));
  const failures: unknown[] = [];
  const vacuum = new PlanVacuum({ sql: bed.db.sql, log: (msg, fields) => failures.push({ msg, fields }) });

  await batch('storage_plan_vacuumed', account, 0, rows);
  const oneBatch = await pages('storage_plan_vacuumed');
  for (let k = 1; k < batches; k++) {
    vacuum.after(['storage_plan_vacuumed']);
    await vacuum.settled();
    await batch('storage_plan_vacuumed', account, k * rows, rows);
  }
  for (let k = 0; k < batches; k++) await batch('storage_plan_alone', account, k * rows, rows);

  expect(failures).toEqual([]);
  expect(oneBatch).toBeGreaterThan(50);
  expect(await pages('storage_plan_vacuumed')).toBeLessThanOrEqual(2 * oneBatch);
  expect(await pages('storage_plan_alone')).toBeGreaterThanOrEqual(batches * oneBatch * 0.9);
});

test('tables asked for while a VACUUM runs are vacuumed once each after it; settled waits for them', async () => {
  const account = crypto.randomUUID();
  await bed.db.sql.unsafe(planTableDdl('storage_plan_a'));
  await bed.db.sql.unsafe(planTableDdl('storage_plan_b'));
  await batch('storage_plan_a', account, 0, 2_000);
  await batch('storage_plan_b', account, 0, 2_000);
  const vacuum = new PlanVacuum({ sql: bed.db.sql, log: () => {} });
  vacuum.after(['storage_plan_a']);
  vacuum.after(['storage_plan_a', 'storage_plan_b']);
  vacuum.after(['storage_plan_b']);
  await vacuum.settled();
  const counts = await bed.db.sql<{ relname: string; vacuum_count: string }[]>`
    select relname, vacuum_count from pg_stat_user_tables
    where relname in ('storage_plan_a', 'storage_plan_b') order by relname`;
  // a: the first ask, then once more for the second; b: once for the second and third asks together.
  expect(counts.map((c) => [c.relname, Number(c.vacuum_count)])).toEqual([
    ['storage_plan_a', 2],
    ['storage_plan_b', 1],
  ]);
});

test('a VACUUM that fails is logged, and settled still resolves', async () => {
  const logged: { msg: string; fields?: object }[] = [];
  const vacuum = new PlanVacuum({ sql: bed.db.sql, log: (msg, fields) => logged.push({ msg, fields }) });
  vacuum.after(['storage_plan_missing']);
  await vacuum.settled();
  expect(logged).toEqual([
    {
      msg: 'import plan vacuum failed',
      fields: { table: 'storage_plan_missing', error: 'relation "storage_plan_missing" does not exist' },
    },
  ]);
});

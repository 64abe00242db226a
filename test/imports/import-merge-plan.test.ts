/**
 * The merge statement's plan cannot turn quadratic when the statistics of `contacts` predate the
 * importing account (the planner then expects ONE contact for it). With the batch written as plain
 * joins it materialized all of the account's contacts and filtered them once per staged row; a
 * 1M-row import did not finish. The plan must probe contacts and seeds through their primary keys
 * per staged row and update through the primary key's conflict check (INSERT … ON CONFLICT), with no
 * join filter over a whole account anywhere.
 */
import { expect, test } from 'bun:test';
import { runImport } from '../../worker/import/index';
import { fusedParams, partStatements } from '../../worker/import/merge/sql-files';
import { ensureRejectsTable } from '../../worker/import/rejects';
import { ownStaging, stagingTables } from '../../worker/import/staging';
import { importBed } from '../helpers/import-bed';
import { importRow, stageImport, testConfig } from '../helpers/file-store';
import { createAccount, createAttribute, createBrand } from '../helpers/fixtures';

const bed = importBed();

const EXISTING = 3_000;

test('statistics predating the account: each staged row is one primary-key probe, and so is each update', async () => {
  const sql = bed.db.sql;
  const other = await createAccount(sql, 'other');
  await sql`
    insert into contacts (account_id, email_md5, email, first_source)
    select ${other}, md5('o' || n || '@example.com')::uuid, 'o' || n || '@example.com', 'api'
    from generate_series(1, 20000) n`;
  await sql`analyze contacts`;
  await sql`analyze seed_addresses`;

  // Everything of this account arrives after the statistics were taken.
  const id = await createAccount(sql);
  await createAttribute(sql, id, 'firstName', 'string');
  await createBrand(sql, id, 'Alpha');
  await sql`
    insert into contacts (account_id, email_md5, email, attributes, first_source)
    select ${id}, md5('u' || n || '@example.com')::uuid, 'u' || n || '@example.com', '{"firstName":"Old"}', 'api'
    from generate_series(1, ${EXISTING}) n`;
  await sql`
    insert into seed_addresses (account_id, email_md5, email)
    values (${id}, md5('u7@example.com')::uuid, 'u7@example.com')`;
  // A seed inserted by hand moves the account's seeds counter (sql/migrations/0018).
  await sql`select seeds_changed(${id}::uuid)`;

  // The merge table as the dedupe phase leaves it, and the statement as merge.ts runs it.
  const importId = crypto.randomUUID();
  const { table, plan: planTable } = stagingTables(importId).parts[0]!; // no plan table made: the CTE is the plan
  await sql.unsafe(`
    create unlogged table ${table} as
    select '${id}'::uuid as account_id, row_number() over (order by md5) as seq, md5 as email_md5, n as row_no, email,
           '{"firstName":"New"}'::jsonb as attributes,
           '{}'::uuid[] as brand_ids, 1::int2 as attribute_count
    from (select n, md5('u' || n || '@example.com')::uuid as md5, 'u' || n || '@example.com' as email
          from generate_series(1, ${2 * EXISTING}) n) x`);
  await sql.unsafe(`alter table ${table} add primary key (account_id, seq)`);
  await sql.unsafe(`analyze ${table}`);
  // The statement as merge.ts builds it on one PostgreSQL (fused: the plan a CTE), recording skips
  // and publishing events, with the rejects table it names.
  const rejects = stagingTables(importId).rejects;
  await ensureRejectsTable(sql, ownStaging(importId, id), id);
  const form = { distributed: false, recordSkips: true, publishEvents: true };
  const { fused } = (await partStatements({ merge: table, plan: planTable, rejects }, form)).merge;
  const explain = (statement: string, params: unknown[]) =>
    sql.begin(async (tx) => {
      await tx`set local enable_hashjoin = off`;
      await tx`set local enable_mergejoin = off`;
      const rows = await tx.unsafe<{ 'QUERY PLAN': string }[]>(`explain ${statement}`, params as never[], {
        prepare: false,
      });
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    });
  const job = { strategy: 'overwrite', overwriteBrands: false, restoreDisabled: false, id: importId, method: 'api' };
  const plan = await explain(fused!, fusedParams([id, 0, 2 * EXISTING], job, true));
  await sql.unsafe(`drop table ${table}, ${rejects}`);

  expect(plan).toMatch(
    new RegExp(
      String.raw`Index Scan using contacts_pkey on contacts c\s*\(.*\n\s*` +
        String.raw`Index Cond: \(\(account_id = '[0-9a-f-]+'::uuid\) AND \(email_md5 = r\.email_md5\)\)`,
    ),
  );
  // Seeds: a probe per row too (a scan of the whole table when it is this tiny, an index probe when not).
  expect(plan).toMatch(
    new RegExp(
      String.raw`on seed_addresses s\s*\(.*\n\s*` +
        String.raw`(Index Cond|Filter): \(\(account_id = '[0-9a-f-]+'::uuid\) AND \(email_md5 = r\.email_md5\)\)`,
    ),
  );
  expect(plan).not.toMatch(/Join Filter/);
  // The write reads the plan and finds each contact again through its primary key.
  expect(plan).toMatch(
    /Insert on contacts c(_\d+)?\s*\(.*\n\s*Conflict Resolution: UPDATE\n\s*Conflict Arbiter Indexes: contacts_pkey/,
  );
  expect(plan).not.toMatch(/Update on contacts|Hash|Merge Join/);

  // And the real import of that file ends with the counts the semantics demand.
  const lines = Array.from({ length: 2 * EXISTING }, (_, i) => `u${i + 1}@example.com,New`);
  const csv = `Email,firstName\n${lines.join('\n')}\n`;
  const stagedId = await stageImport(sql, bed.files.store, id, csv, { columns: ['Email', 'firstName'] });
  await runImport({ sql, storage: bed.files.store, config: testConfig(1_000) }, id, stagedId);
  const row = await importRow(sql, id, stagedId);
  expect(row).toMatchObject({ status: 'success', addedCount: EXISTING, updatedCount: EXISTING - 1, skippedCount: 1 });
}, 60_000);

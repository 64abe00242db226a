/**
 * A PostgreSQL crash empties UNLOGGED tables. The raw staged rows are unlogged, so a crash between
 * the end of the read phase and the dedupe commit would leave an empty table behind a committed
 * `dedupe` phase. The import must notice and read the file again, never merge the empty table as if
 * the file had no rows.
 */
import { expect, test } from 'bun:test';
import { runImport } from '../../worker/import/index';
import { stagingTables, type StagingTables } from '../../worker/import/staging';
import { importBed } from '../helpers/import-bed';
import { importRow, stageImport, testConfig } from '../helpers/file-store';
import { createAccount, createAttribute } from '../helpers/fixtures';

const bed = importBed();

test('staged rows wiped after the read phase (as by a server crash) are read again; counts are exact', async () => {
  const accountId = await createAccount(bed.db.sql);
  await createAttribute(bed.db.sql, accountId, 'firstName', 'string');
  const csv = 'Email,firstName\na@example.com,A\nb@example.com,B\na@example.com,A2\nnot-an-email,X\nc@example.com,C\n';
  const id = await stageImport(bed.db.sql, bed.files.store, accountId, csv, { columns: ['Email', 'firstName'] });
  // Wipes the staging table in the very commit that moves the import to dedupe, once.
  await bed.db.sql.unsafe(`
    create table wipe_once (done boolean not null);
    insert into wipe_once values (false);
    create function wipe_staging() returns trigger language plpgsql as $$
    begin
      if (select not done from wipe_once) then
        update wipe_once set done = true;
        execute format('truncate %I', 'import_rows_' || replace(new.id::text, '-', ''));
      end if;
      return new;
    end $$;
    create trigger wipe_staging after update of phase on contact_imports
      for each row when (old.phase = 'read' and new.phase = 'dedupe') execute function wipe_staging();`);
  const logs: string[] = [];
  const deps = {
    sql: bed.db.sql,
    storage: bed.files.store,
    config: testConfig(2),
    log: (msg: string) => logs.push(msg),
  };

  // The run notices the empty table, sends the import back to read and resumes it itself.
  await runImport(deps, accountId, id);
  expect(logs.filter((m) => m === 'import read')).toHaveLength(2);
  const done = await importRow(bed.db.sql, accountId, id);
  expect(done).toMatchObject({
    status: 'success',
    rowCount: 3,
    addedCount: 3,
    malformedCount: 1,
    duplicateInFileCount: 1,
  });
  const names = await bed.db.sql<
    { v: string }[]
  >`select attributes->>'firstName' as v from contacts where account_id = ${accountId} order by email`;
  expect(names.map((r) => r.v)).toEqual(['A2', 'B', 'C']);
});

// What a PostgreSQL crash does to unlogged tables (empty, still there), and a part of the merge
// table gone: either way the merge table is built again.
const disruptions = [
  [
    'staging wiped in the middle of the merge (as by a server crash)',
    (t: StagingTables) => t.parts.map((x) => `truncate ${x.table};`).join(''),
  ],
  [
    'a part of the merge table missing in the middle of the merge',
    (t: StagingTables) => `drop table ${t.parts[0]!.table}`,
  ],
] as const;

for (const [what, disrupt] of disruptions)
  test(`${what}: read again, the plan rebuilt, the merge goes on from its checkpoint with exact counts`, async () => {
    const accountId = await createAccount(bed.db.sql);
    await createAttribute(bed.db.sql, accountId, 'firstName', 'string');
    // e03 exists already: it is updated in whichever batch its md5 falls, before or after the wipe.
    await bed.db.sql`
    insert into contacts (account_id, email_md5, email, attributes, first_source)
    values (${accountId}, md5('e03@example.com')::uuid, 'e03@example.com', '{"firstName":"Old"}', 'api')`;
    const emails = Array.from({ length: 10 }, (_, i) => `e${String(i).padStart(2, '0')}@example.com`);
    const csv = `Email,firstName\n${emails.map((e) => `${e},First`).join('\n')}\ne05@example.com,Last\nbad,X\n`;
    const id = await stageImport(bed.db.sql, bed.files.store, accountId, csv, { columns: ['Email', 'firstName'] });
    // The second batch's commit fails once: the worker stops with the first batch merged.
    await bed.db.sql.unsafe(`
    drop function if exists fail_second_batch cascade;
    drop sequence if exists fail_once;
    create sequence fail_once; -- not transactional: the rollback of the failing batch keeps it moved
    create function fail_second_batch() returns trigger language plpgsql as $$
    begin
      if old.checkpoint > 0 and nextval('fail_once') = 1 then
        -- Not a database fault (those the run rides out itself): the run stops here, as a killed worker would.
        raise exception 'worker killed';
      end if;
      return new;
    end $$;
    create trigger fail_second_batch before update of checkpoint on contact_imports
      for each row execute function fail_second_batch();`);
    const deps = { sql: bed.db.sql, storage: bed.files.store, config: testConfig(3) };
    await expect(runImport(deps, accountId, id)).rejects.toThrow();
    const between = await importRow(bed.db.sql, accountId, id);
    expect(between).toMatchObject({ status: 'importing', rowCount: 10 });
    const hex = id.replaceAll('-', '');
    await bed.db.sql.unsafe(disrupt(stagingTables(id)));

    await runImport(deps, accountId, id);
    const done = await importRow(bed.db.sql, accountId, id);
    expect(done).toMatchObject({
      status: 'success',
      rowCount: 10,
      addedCount: 9,
      updatedCount: 1,
      skippedCount: 0,
      malformedCount: 1,
      duplicateInFileCount: 1,
    });
    const rows = await bed.db.sql<{ email: string; v: string }[]>`
    select email, attributes->>'firstName' as v from contacts where account_id = ${accountId} order by email`;
    expect(rows.map((r) => r.email)).toEqual(emails);
    expect(rows.find((r) => r.email === 'e05@example.com')?.v).toBe('Last');
    expect(rows.every((r) => r.v === (r.email === 'e05@example.com' ? 'Last' : 'First'))).toBe(true);
    const [{ n }] = (await bed.db
      .sql`select count(*)::int as n from pg_class where relname like ${`import_%_${hex}`}`) as unknown as [
      { n: number },
    ];
    expect(n).toBe(0);
  });

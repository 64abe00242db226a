/**
 * The merge phase runs two batches at once (worker/import/merge.ts) and keeps every guarantee of
 * one-at-a-time batches: exact counts, a contiguous checkpoint (a batch never commits past a
 * predecessor that failed), single writes drained and then refused, and two imports of one account
 * never merging together (one failed under its merge, the next one started). Batches are slowed
 * or broken with triggers on `contacts` for one account.
 */
import { afterEach, describe, expect, test } from 'bun:test';
import { withContactWrite } from '../../src/contacts/write-guard';
import { ApiError } from '../../src/errors';
import { markImportFailed } from '../../src/imports/lifecycle';
import { runImport } from '../../worker/import/index';
import { mergeBatchEnds } from '../helpers/batch-ends';
import { importBed } from '../helpers/import-bed';
import { importRow, stageImport, testConfig } from '../helpers/file-store';
import { createAccount, createAttribute } from '../helpers/fixtures';

const bed = importBed();

afterEach(async () => {
  await bed.db.sql`drop trigger if exists merge_test on contacts`;
  await bed.db.sql`drop function if exists merge_test()`;
  await bed.db.sql`drop sequence if exists merge_test_once`;
});

const BATCH = 7;

async function account(): Promise<string> {
  const id = await createAccount(bed.db.sql);
  await createAttribute(bed.db.sql, id, 'firstName', 'string');
  return id;
}

/** `rows` addresses u0…, every third one an existing contact (so batches take both paths). */
async function file(accountId: string, rows: number, name = 'New'): Promise<string> {
  await bed.db.sql`
    insert into contacts (account_id, email_md5, email, attributes, first_source)
    select ${accountId}, md5('u' || n || '@example.com')::uuid, 'u' || n || '@example.com', '{"firstName":"Old"}', 'api'
    from generate_series(0, ${rows - 1}, 3) n
    on conflict do nothing`;
  return `Email,firstName\n${Array.from({ length: rows }, (_, i) => `u${i}@example.com,${name}`).join('\n')}\n`;
}

/** A row trigger on the account's contact writes, running `body` (plpgsql) for each. */
async function trigger(accountId: string, body: string): Promise<void> {
  await bed.db.sql.unsafe(`
    create function merge_test() returns trigger language plpgsql as $$
    begin
      if new.account_id = '${accountId}' then ${body} end if;
      return new;
    end $$`);
  await bed.db
    .sql`create trigger merge_test before insert or update on contacts for each row execute function merge_test()`;
}

/** The address at 1-based position `seq` of the file's `rows` addresses in email_md5 order, as dedupe numbers them. */
async function atSeq(rows: number, seq: number): Promise<string> {
  const [r] = await bed.db.sql<{ email: string }[]>`
    select 'u' || n || '@example.com' as email from generate_series(0, ${rows - 1}) n
    order by md5('u' || n || '@example.com')::uuid offset ${seq - 1} limit 1`;
  return r!.email;
}

/** The checkpoints a merge of the file's `rows` addresses (u0…) moves through. */
const batchEnds = (rows: number) => mergeBatchEnds(rows, BATCH);

async function run(
  accountId: string,
  importId: string,
  o: { concurrency?: number; logs?: { msg: string; fields: Record<string, unknown> }[] } = {},
) {
  const config = { ...testConfig(BATCH), importMergeConcurrency: o.concurrency ?? 2 };
  const log = (msg: string, fields?: object) =>
    o.logs?.push({ msg, fields: (fields ?? {}) as Record<string, unknown> });
  await runImport({ sql: bed.db.sql, storage: bed.files.store, config, log }, accountId, importId);
}

async function contactsOf(accountId: string): Promise<number> {
  const [r] = await bed.db.sql<
    { n: number }[]
  >`select count(*)::int as n from contacts where account_id = ${accountId}`;
  return r!.n;
}

describe('two batches in flight', () => {
  test('an import of many batches ends with exactly the counts and contacts of one batch at a time', async () => {
    const [a, b] = [await account(), await account()];
    const logs: { msg: string; fields: Record<string, unknown> }[] = [];
    const idA = await stageImport(bed.db.sql, bed.files.store, a, await file(a, 300), {
      columns: ['Email', 'firstName'],
    });
    const idB = await stageImport(bed.db.sql, bed.files.store, b, await file(b, 300), {
      columns: ['Email', 'firstName'],
    });
    await run(a, idA, { logs });
    await run(b, idB, { concurrency: 1 });

    const [rowA, rowB] = [await importRow(bed.db.sql, a, idA), await importRow(bed.db.sql, b, idB)];
    expect(rowA).toMatchObject({
      status: 'success',
      rowCount: 300,
      addedCount: 200,
      updatedCount: 100,
      skippedCount: 0,
    });
    expect(rowB).toMatchObject({
      addedCount: rowA.addedCount,
      updatedCount: rowA.updatedCount,
      skippedCount: rowA.skippedCount,
    });
    const [same] = await bed.db.sql<{ diff: number }[]>`
      select count(*)::int as diff from (
        (select email, attributes from contacts where account_id = ${a}
         except select email, attributes from contacts where account_id = ${b})
        union all
        (select email, attributes from contacts where account_id = ${b}
         except select email, attributes from contacts where account_id = ${a})) x`;
    expect(same!.diff).toBe(0);

    // Commits in seq order, one batch at a time: the checkpoint moves by whole batches, never back.
    const batches = logs.filter((l) => l.msg === 'import merge batch');
    expect(batches.map((l) => l.fields.checkpoint)).toEqual(batchEnds(300));
    const percents = batches.map((l) => l.fields.percentComplete as number);
    expect(percents).toEqual([...percents].sort((x, y) => x - y));
    expect(new Set(percents).size).toBeGreaterThan(30);
  }, 60_000);

  test('a batch whose predecessor fails does not commit past it, and the redo gives exact counts', async () => {
    const id = await account();
    const csv = await file(id, 200);
    // Seq 101 fails in its batch after the batch after it has done its work and waits.
    const victim = await atSeq(200, 101);
    const before = batchEnds(200)
      .filter((e) => e < 101)
      .at(-1)!;
    await trigger(id, `if new.email = '${victim}' then perform pg_sleep(0.5); raise exception 'boom'; end if;`);
    const importId = await stageImport(bed.db.sql, bed.files.store, id, csv, { columns: ['Email', 'firstName'] });
    const logs: { msg: string; fields: Record<string, unknown> }[] = [];
    const error = await run(id, importId, { logs }).catch((e: unknown) => e);
    expect(String(error)).toContain('boom');

    const broken = await importRow(bed.db.sql, id, importId);
    expect(broken).toMatchObject({ status: 'importing', phase: 'merge', checkpoint: before });
    // Every staged row up to the checkpoint merged, none after it: the contacts are the 67 that
    // existed plus exactly the adds of the committed batches.
    expect((await contactsOf(id)) - 67).toBe(broken.addedCount);
    expect(broken.addedCount + broken.updatedCount! + broken.skippedCount!).toBe(before);
    expect(logs.filter((l) => l.msg === 'import merge batch').at(-1)?.fields.checkpoint).toBe(before);

    await bed.db.sql`drop trigger merge_test on contacts`;
    await run(id, importId);
    expect(await importRow(bed.db.sql, id, importId)).toMatchObject({
      status: 'success',
      rowCount: 200,
      addedCount: 133,
      updatedCount: 67,
      skippedCount: 0,
    });
    expect(await contactsOf(id)).toBe(200);
  }, 60_000);

  test('a batch that lost a race is retried, and its successor that waited on it is redone', async () => {
    const id = await account();
    const csv = await file(id, 200);
    await bed.db.sql`create sequence merge_test_once`;
    // The first attempt of the batch of seq 101 fails as a serialization failure would, once.
    const victim = await atSeq(200, 101);
    await trigger(
      id,
      `if new.email = '${victim}' and nextval('merge_test_once') = 1 then
         perform pg_sleep(0.5); raise exception 'race' using errcode = '40001';
       end if;`,
    );
    const importId = await stageImport(bed.db.sql, bed.files.store, id, csv, { columns: ['Email', 'firstName'] });
    const logs: { msg: string; fields: Record<string, unknown> }[] = [];
    await run(id, importId, { logs });
    expect(logs.some((l) => l.msg === 'import merge batch retried' && l.fields.code === '40001')).toBe(true);
    expect(await importRow(bed.db.sql, id, importId)).toMatchObject({
      status: 'success',
      rowCount: 200,
      addedCount: 133,
      updatedCount: 67,
      skippedCount: 0,
    });
    expect(await contactsOf(id)).toBe(200);
  }, 60_000);
});

describe('locking', () => {
  test('a single write in flight when the merge starts holds every batch off until it commits', async () => {
    const id = await account();
    const importId = await stageImport(bed.db.sql, bed.files.store, id, await file(id, 100), {
      columns: ['Email', 'firstName'],
    });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const write = withContactWrite(bed.db.sql, id, async (tx) => {
      await gate;
      await tx`
        update contacts set attributes = '{"firstName":"Single"}'
        where account_id = ${id} and email_md5 = md5('u0@example.com')::uuid`;
    });
    await Bun.sleep(100); // the write holds the account's lock shared
    const imported = run(id, importId);
    const end = Date.now() + 20_000;
    while (!(await bed.db.sql`select 1 from bulk_operations where id = ${importId}`).length && Date.now() < end)
      await Bun.sleep(20);
    await Bun.sleep(500);
    expect(await importRow(bed.db.sql, id, importId)).toMatchObject({ phase: 'merge', checkpoint: 0 });
    release();
    await write;
    await imported;
    // The batch came after the write: the import's value won.
    const [c] = await bed.db.sql<{ firstName: string }[]>`
      select attributes->>'firstName' as "firstName" from contacts
      where account_id = ${id} and email_md5 = md5('u0@example.com')::uuid`;
    expect(c!.firstName).toBe('New');
    expect(await importRow(bed.db.sql, id, importId)).toMatchObject({
      status: 'success',
      addedCount: 66,
      updatedCount: 34,
    });
  }, 60_000);

  test('a single write started during the merge gets 409 operation_in_progress', async () => {
    const id = await account();
    await trigger(id, `perform pg_sleep(0.01);`); // about 70 ms a batch
    const importId = await stageImport(bed.db.sql, bed.files.store, id, await file(id, 200), {
      columns: ['Email', 'firstName'],
    });
    const imported = run(id, importId);
    const end = Date.now() + 20_000;
    while ((await importRow(bed.db.sql, id, importId)).checkpoint === 0 && Date.now() < end) await Bun.sleep(10);
    const attempt = await withContactWrite(bed.db.sql, id, async () => 'written').catch((e: unknown) => e);
    expect(attempt).toBeInstanceOf(ApiError);
    expect((attempt as ApiError).code).toBe('operation_in_progress');
    await imported;
    expect((await importRow(bed.db.sql, id, importId)).checkpoint).toBe(200);
  }, 60_000);

  test('an import of the account waits for the merge of one failed under it, and ends with exact counts', async () => {
    const id = await account();
    const csv = await file(id, 150);
    // Only the first import's rows (firstName New) are slow: about 350 ms a batch.
    await trigger(id, `if new.attributes->>'firstName' = 'New' then perform pg_sleep(0.05); end if;`);
    const first = await stageImport(bed.db.sql, bed.files.store, id, csv, { columns: ['Email', 'firstName'] });
    const firstRun = run(id, first);
    const end = Date.now() + 20_000;
    while ((await importRow(bed.db.sql, id, first)).checkpoint === 0 && Date.now() < end) await Bun.sleep(10);
    // Failed by another hand while two of its batches are in flight; the next import may start.
    await markImportFailed(bed.db.sql, id, first, 'given up');
    const second = await stageImport(bed.db.sql, bed.files.store, id, csv.replaceAll(',New', ',Newer'), {
      columns: ['Email', 'firstName'],
    });
    const logs: { msg: string; fields: Record<string, unknown> }[] = [];
    await Promise.all([firstRun, run(id, second, { logs })]);

    expect(logs.some((l) => l.msg === 'import merge waits for another import of the account')).toBe(true);
    const early = await importRow(bed.db.sql, id, first);
    expect(early).toMatchObject({ status: 'failed' });
    expect(early.addedCount).toBeGreaterThan(0);
    // What the failed import committed is there; the second found it and updated it.
    expect(await importRow(bed.db.sql, id, second)).toMatchObject({
      status: 'success',
      addedCount: 100 - early.addedCount,
      updatedCount: 50 + early.addedCount,
      skippedCount: 0,
    });
    expect(await contactsOf(id)).toBe(150);
  }, 60_000);
});

/**
 * The import pipeline (worker/import) against a real database and the local object store: counts,
 * the strategy tables, cells, brands, seeds, events, file format and failure modes.
 */
import { describe, expect, test } from 'bun:test';
import { markImportFailed } from '../../src/imports/lifecycle';
import { runImport } from '../../worker/import/index';
import { importBed } from '../helpers/import-bed';
import { importRow, stageImport, testConfig, type ImportOptions } from '../helpers/file-store';
import { createAccount, createAttribute, createBrand } from '../helpers/fixtures';

const bed = importBed();

interface Account {
  id: string;
  alpha: string;
  semi: string;
  delta: string;
}

/** An account with one attribute of each type and three brands, one with a `;` in its name. */
async function account(): Promise<Account> {
  const id = await createAccount(bed.db.sql);
  for (const [name, type] of [
    ['firstName', 'string'],
    ['lastName', 'string'],
    ['age', 'number'],
    ['vip', 'boolean'],
    ['tags', 'array'],
    ['work', 'email'],
  ]) {
    await createAttribute(bed.db.sql, id, name!, type!);
  }
  return {
    id,
    alpha: await createBrand(bed.db.sql, id, 'Alpha'),
    semi: await createBrand(bed.db.sql, id, 'Beta;Gamma'),
    delta: await createBrand(bed.db.sql, id, 'Delta'),
  };
}

async function importCsv(
  accountId: string,
  csv: string | Uint8Array,
  o: Partial<ImportOptions> & { batch?: number } = {},
) {
  const columns = o.columns ?? csvHeader(csv);
  const id = await stageImport(bed.db.sql, bed.files.store, accountId, csv, { ...o, columns });
  await runImport({ sql: bed.db.sql, storage: bed.files.store, config: testConfig(o.batch ?? 3) }, accountId, id);
  return { id, row: await importRow(bed.db.sql, accountId, id) };
}

/** Canonical column names from a test file's first line (tests write the header in canonical case). */
function csvHeader(csv: string | Uint8Array): string[] {
  const text = typeof csv === 'string' ? csv : new TextDecoder().decode(csv);
  return text
    .replace(/^\uFEFF/, '')
    .split(/\r?\n/)[0]!
    .split(',')
    .map((c) => c.trim());
}

async function contact(accountId: string, email: string) {
  const [row] = await bed.db.sql<
    {
      email: string;
      attributes: Record<string, unknown>;
      brandIds: string[];
      enabled: boolean;
      firstSource: string;
      firstImportId: string | null;
      firstImportMethod: string | null;
      updatedAt: Date;
    }[]
  >`
    select email, attributes, brand_ids::text[] as "brandIds", enabled, first_source as "firstSource",
           first_import_id as "firstImportId", first_import_method as "firstImportMethod", updated_at as "updatedAt"
    from contacts where account_id = ${accountId} and email_md5 = md5(lower(${email}))::uuid`;
  return row;
}

async function existing(
  accountId: string,
  email: string,
  o: { attributes?: object; brandIds?: string[]; enabled?: boolean } = {},
) {
  await bed.db.sql`
    insert into contacts (account_id, email_md5, email, attributes, brand_ids, enabled, first_source, updated_at)
    values (${accountId}, md5(lower(${email}))::uuid, ${email}, ${bed.db.sql.json((o.attributes ?? {}) as never)},
            ${bed.db.sql.array(o.brandIds ?? [])}::uuid[], ${o.enabled ?? true}, 'api', '2020-01-01T00:00:00Z')`;
}

async function events(accountId: string) {
  return bed.db.sql<{ email: string; brandId: string; source: string; importId: string }[]>`
    select c.email, e.brand_id::text as "brandId", e.source, e.import_id::text as "importId"
    from brand_subscribe_events e
    cross join lateral unnest(e.email_md5s) as m(email_md5)
    join contacts c on c.account_id = e.account_id and c.email_md5 = m.email_md5
    where e.account_id = ${accountId} order by e.id, c.email`;
}

describe('counts', () => {
  test('a row is added, updated, skipped, malformed or a duplicate; rowCount = added + updated + skipped', async () => {
    const a = await account();
    await existing(a.id, 'old@example.com', { attributes: { firstName: 'Old' } });
    await existing(a.id, 'same@example.com', { attributes: { firstName: 'Same' } });
    const csv = [
      'Email,firstName,age',
      'new1@example.com,Ann,1',
      'new2@example.com,Bob,2',
      'old@example.com,Changed,3', // updated
      'same@example.com,Same,', // changes nothing: skipped
      'not-an-email,X,1', // malformed
      ',NoEmail,1', // malformed
      'new3@example.com,Cy,abc', // malformed number
      'new1@example.com,Ann2,4', // later duplicate of row 1: the earlier one is dropped
      'a@example.com,too,many,fields', // malformed
    ].join('\n');
    const { id, row } = await importCsv(a.id, csv);
    expect(row).toMatchObject({
      status: 'success',
      phase: 'finish',
      rowCount: 4,
      addedCount: 2,
      updatedCount: 1,
      skippedCount: 1,
      malformedCount: 4,
      duplicateInFileCount: 1,
      percentComplete: null,
      failureReason: null,
    });
    expect(row.completedAt).toBeInstanceOf(Date);
    expect((await contact(a.id, 'new1@example.com'))!.attributes).toEqual({ firstName: 'Ann2', age: 4 });
    expect(await contact(a.id, 'new3@example.com')).toBeUndefined();
    const created = (await contact(a.id, 'new2@example.com'))!;
    expect(created).toMatchObject({
      firstSource: 'import',
      firstImportId: id,
      firstImportMethod: 'api',
      enabled: true,
    });
  });

  test("the last row per email wins across batches, whatever the address's case, its spelling included", async () => {
    const a = await account();
    const lines = ['Email,firstName'];
    for (let i = 1; i <= 10; i++) lines.push(`dup@example.com,v${i}`, `u${i}@example.com,x`);
    lines.push('DUP@Example.com,last');
    const { row } = await importCsv(a.id, lines.join('\n'), { batch: 3 });
    expect(row).toMatchObject({ rowCount: 11, addedCount: 11, duplicateInFileCount: 10, malformedCount: 0 });
    expect(await contact(a.id, 'dup@example.com')).toMatchObject({
      email: 'DUP@Example.com',
      attributes: { firstName: 'last' },
    });
  });

  test('a merge that changes nothing counts as skipped and does not rewrite the row', async () => {
    const a = await account();
    await existing(a.id, 'x@example.com', { attributes: { firstName: 'X', age: 5 }, brandIds: [a.alpha] });
    const { row } = await importCsv(a.id, 'Email,firstName,age,Brand\nx@example.com,X,5.0,alpha\n', {
      strategy: 'overwrite',
    });
    expect(row).toMatchObject({ rowCount: 1, updatedCount: 0, skippedCount: 1 });
    expect((await contact(a.id, 'x@example.com'))!.updatedAt.toISOString()).toBe('2020-01-01T00:00:00.000Z');
    expect([...(await events(a.id))]).toEqual([]);
  });
});

describe('strategies against an enabled contact', () => {
  const base = { attributes: { firstName: 'Ann', lastName: 'Old' }, enabled: true };

  test('overwrite sets every non-empty cell, keeps the rest, adds brands', async () => {
    const a = await account();
    await existing(a.id, 'c@example.com', { ...base, brandIds: [a.delta] });
    const { row } = await importCsv(a.id, 'Email,firstName,lastName,age,Brand\nc@example.com,,New,7,Alpha\n', {
      strategy: 'overwrite',
    });
    expect(row).toMatchObject({ updatedCount: 1, skippedCount: 0 });
    expect(await contact(a.id, 'c@example.com')).toMatchObject({
      attributes: { firstName: 'Ann', lastName: 'New', age: 7 },
      brandIds: [a.delta, a.alpha],
      firstSource: 'api',
    });
  });

  test('overwrite with all schema attributes sent replaces them all; one attribute fewer keeps that one', async () => {
    const a = await account();
    const old = { firstName: 'Ann', lastName: 'Old', age: 1, vip: false, tags: ['t'], work: 'old@work.example' };
    await existing(a.id, 'all@example.com', { attributes: old });
    await existing(a.id, 'most@example.com', { attributes: old });
    const csv =
      'Email,firstName,lastName,age,vip,tags,work\n' +
      'all@example.com,Bo,New,2,yes,u;v,new@work.example\n' +
      'most@example.com,Bo,New,2,yes,u;v,\n';
    const { row } = await importCsv(a.id, csv, { strategy: 'overwrite' });
    expect(row).toMatchObject({ updatedCount: 2, skippedCount: 0 });
    const sent = { firstName: 'Bo', lastName: 'New', age: 2, vip: true, tags: ['u', 'v'] };
    expect((await contact(a.id, 'all@example.com'))!.attributes).toEqual({ ...sent, work: 'new@work.example' });
    expect((await contact(a.id, 'most@example.com'))!.attributes).toEqual({ ...sent, work: 'old@work.example' });
  });

  test(
    'overwrite keeps a value of an attribute created after the import was declared, ' +
      'though the row sent all of its columns',
    async () => {
      const a = await account();
      const csv = 'Email,firstName,lastName,age,vip,tags,work\nlate@example.com,Bo,New,2,yes,u,new@work.example\n';
      const id = await stageImport(bed.db.sql, bed.files.store, a.id, csv, {
        strategy: 'overwrite',
        columns: csvHeader(csv),
      });
      await createAttribute(bed.db.sql, a.id, 'late', 'string');
      await existing(a.id, 'late@example.com', { attributes: { firstName: 'Ann', late: 'kept' } });
      await runImport({ sql: bed.db.sql, storage: bed.files.store, config: testConfig(3) }, a.id, id);
      expect(await importRow(bed.db.sql, a.id, id)).toMatchObject({ status: 'success', updatedCount: 1 });
      expect((await contact(a.id, 'late@example.com'))!.attributes).toEqual({
        firstName: 'Bo',
        lastName: 'New',
        age: 2,
        vip: true,
        tags: ['u'],
        work: 'new@work.example',
        late: 'kept',
      });
    },
  );

  test('overwrite with overwriteBrands replaces the brands when the row has any, keeps them when not', async () => {
    const a = await account();
    await existing(a.id, 'r@example.com', { ...base, brandIds: [a.delta] });
    await existing(a.id, 'k@example.com', { ...base, brandIds: [a.delta] });
    await importCsv(a.id, 'Email,Brand\nr@example.com,Alpha\nk@example.com,\n', {
      strategy: 'overwrite',
      overwriteBrands: true,
    });
    expect((await contact(a.id, 'r@example.com'))!.brandIds).toEqual([a.alpha]);
    expect((await contact(a.id, 'k@example.com'))!.brandIds).toEqual([a.delta]);
  });

  test('keep fills only blank attributes and adds brands; overwriteBrands does not apply', async () => {
    const a = await account();
    await existing(a.id, 'c@example.com', { ...base, brandIds: [a.delta] });
    const { row } = await importCsv(a.id, 'Email,firstName,age,Brand\nc@example.com,Zed,9,Alpha\n', {
      strategy: 'keep',
      overwriteBrands: true,
    });
    expect(row.updatedCount).toBe(1);
    expect(await contact(a.id, 'c@example.com')).toMatchObject({
      attributes: { firstName: 'Ann', lastName: 'Old', age: 9 },
      brandIds: [a.delta, a.alpha],
    });
  });

  test('skip leaves the contact untouched and counts it skipped', async () => {
    const a = await account();
    await existing(a.id, 'c@example.com', { ...base, brandIds: [a.delta] });
    const { row } = await importCsv(a.id, 'Email,firstName,Brand\nc@example.com,Zed,Alpha\n', { strategy: 'skip' });
    expect(row).toMatchObject({ updatedCount: 0, skippedCount: 1 });
    expect(await contact(a.id, 'c@example.com')).toMatchObject({ attributes: base.attributes, brandIds: [a.delta] });
  });
});

describe('strategies against a disabled contact', () => {
  const base = { attributes: { firstName: 'Ann', lastName: 'Old' }, enabled: false };

  for (const strategy of ['overwrite', 'keep', 'skip'] as const) {
    test(`${strategy} without restoreDisabled: skipped, stays disabled and unchanged`, async () => {
      const a = await account();
      await existing(a.id, 'd@example.com', { ...base, brandIds: [a.delta] });
      const { row } = await importCsv(a.id, 'Email,firstName,Brand\nd@example.com,Zed,Alpha\n', { strategy });
      expect(row).toMatchObject({ updatedCount: 0, skippedCount: 1 });
      expect(await contact(a.id, 'd@example.com')).toMatchObject({
        enabled: false,
        attributes: base.attributes,
        brandIds: [a.delta],
      });
    });
  }

  test('overwrite with restoreDisabled enables it and merges as overwrite', async () => {
    const a = await account();
    await existing(a.id, 'd@example.com', { ...base, brandIds: [a.delta] });
    const { row } = await importCsv(a.id, 'Email,firstName,Brand\nd@example.com,Zed,Alpha\n', {
      strategy: 'overwrite',
      restoreDisabled: true,
    });
    expect(row.updatedCount).toBe(1);
    expect(await contact(a.id, 'd@example.com')).toMatchObject({
      enabled: true,
      attributes: { firstName: 'Zed', lastName: 'Old' },
      brandIds: [a.delta, a.alpha],
    });
  });

  test('keep with restoreDisabled enables it and fills blanks only', async () => {
    const a = await account();
    await existing(a.id, 'd@example.com', { ...base });
    await importCsv(a.id, 'Email,firstName,age\nd@example.com,Zed,3\n', { strategy: 'keep', restoreDisabled: true });
    expect(await contact(a.id, 'd@example.com')).toMatchObject({
      enabled: true,
      attributes: { firstName: 'Ann', lastName: 'Old', age: 3 },
    });
  });

  test('skip with restoreDisabled keeps only attributes sent, replaces brands if sent, else keeps them', async () => {
    const a = await account();
    await existing(a.id, 'b@example.com', { ...base, brandIds: [a.delta] });
    await existing(a.id, 'n@example.com', { ...base, brandIds: [a.delta] });
    const { row } = await importCsv(a.id, 'Email,firstName,Brand\nb@example.com,Zed,Alpha\nn@example.com,,\n', {
      strategy: 'skip',
      restoreDisabled: true,
    });
    expect(row).toMatchObject({ updatedCount: 2, skippedCount: 0 });
    expect(await contact(a.id, 'b@example.com')).toMatchObject({
      enabled: true,
      attributes: { firstName: 'Zed' },
      brandIds: [a.alpha],
    });
    expect(await contact(a.id, 'n@example.com')).toMatchObject({ enabled: true, attributes: {}, brandIds: [a.delta] });
  });

  test('restoring with nothing else to change still counts as updated', async () => {
    const a = await account();
    await existing(a.id, 'd@example.com', { ...base });
    const { row } = await importCsv(a.id, 'Email\nd@example.com\n', { strategy: 'overwrite', restoreDisabled: true });
    expect(row).toMatchObject({ updatedCount: 1, skippedCount: 0 });
    expect((await contact(a.id, 'd@example.com'))!.enabled).toBe(true);
  });
});

describe('seeds', () => {
  test('a row for a seed address is skipped and no contact is created', async () => {
    const a = await account();
    await bed.db.sql`
      insert into seed_addresses (account_id, email_md5, email)
      values (${a.id}, md5('seed@example.com')::uuid, 'seed@example.com')`;
    // A seed inserted by hand moves the account's seeds counter (sql/migrations/0018).
    await bed.db.sql`select seeds_changed(${a.id}::uuid)`;
    const { row } = await importCsv(a.id, 'Email,firstName\nSeed@Example.com,S\nx@example.com,X\n');
    expect(row).toMatchObject({ rowCount: 2, addedCount: 1, skippedCount: 1 });
    expect(await contact(a.id, 'seed@example.com')).toBeUndefined();
  });
});

describe('a final import holds no contact writes', () => {
  test('a hold left behind for a failed import is released by the next run of its job', async () => {
    // The state a run leaves when it held the account after another hand had failed the import
    // (or died just after): a bulk_operations row for an import that is already final.
    const a = await account();
    const id = await stageImport(bed.db.sql, bed.files.store, a.id, 'Email\nann@example.com\n', {
      columns: ['Email'],
    });
    await markImportFailed(bed.db.sql, a.id, id, 'Cancelled by a test.');
    await bed.db.sql`
      insert into bulk_operations (account_id, id, kind, estimated_end)
      values (${a.id}, ${id}, 'contact-import', now() + interval '1 hour')`;
    await runImport({ sql: bed.db.sql, storage: bed.files.store, config: testConfig(3) }, a.id, id);
    const holds = await bed.db.sql`select 1 from bulk_operations where account_id = ${a.id}`;
    expect(holds.length).toBe(0);
    expect((await importRow(bed.db.sql, a.id, id)).status).toBe('failed');
  });
});

/**
 * A big file's staged rows are partitioned by email_md5 into slices (worker/import/staging.ts), so
 * that the dedupe sorts each slice in memory instead of spilling a whole part to disk. Sliced or
 * not, an import must give the same contacts and the same counts: the last row of each email, every
 * email once, numbered in email_md5 order across the slices of a part.
 */
import { expect, test } from 'bun:test';
import { runImport } from '../../worker/import/index';
import { MERGE_PARTS, stagingSlices } from '../../worker/import/staging';
import { importBed } from '../helpers/import-bed';
import { importRow, stageImport, testConfig } from '../helpers/file-store';
import { createAccount, createAttribute, createBrand } from '../helpers/fixtures';

const bed = importBed();
const MB = 1 << 20;

test('slices: one table up to two slices of file, then whole slices for each merge part', () => {
  expect(stagingSlices(0)).toBe(1);
  expect(stagingSlices(640 * MB)).toBe(1);
  expect(stagingSlices(640 * MB + 1)).toBe(2 * MERGE_PARTS);
  expect(stagingSlices(4_701_923_604)).toBe(16); // the bench's 25M-row file
  for (let size = 0; size < 20_000 * MB; size += 333 * MB) {
    const n = stagingSlices(size);
    expect(n === 1 || n % MERGE_PARTS === 0).toBe(true);
  }
});

/** 3,000 rows: 2,400 emails, 500 repeated later (in other case, padded) with new values, 100 malformed. */
function file(): string {
  const lines = ['Email,firstName,score,Brand'];
  for (let n = 0; n < 2_400; n++) lines.push(`user${n}@example.com,First ${n},${n},Alpha`);
  for (let n = 0; n < 500; n++) lines.push(` USER${n * 4}@Example.com ,Again ${n},${-n},beta`);
  for (let n = 0; n < 100; n++) lines.push(`not-an-email-${n},X,1,Alpha`);
  return lines.join('\n') + '\n';
}

async function importInto(objectSize: number | undefined) {
  const sql = bed.db.sql;
  const accountId = await createAccount(sql);
  await createAttribute(sql, accountId, 'firstName', 'string');
  await createAttribute(sql, accountId, 'score', 'number');
  await createBrand(sql, accountId, 'Alpha');
  await createBrand(sql, accountId, 'Beta');
  const id = await stageImport(sql, bed.files.store, accountId, file(), {
    columns: ['Email', 'firstName', 'score', 'Brand'],
  });
  // The object as big as a file that is read in slices (the file itself stays small).
  if (objectSize !== undefined)
    await sql`update contact_imports set object_size = ${objectSize} where account_id = ${accountId} and id = ${id}`;
  const slices: unknown[] = [];
  const deps = {
    sql,
    storage: bed.files.store,
    config: testConfig(700),
    log: (msg: string, fields?: object) => {
      if (msg === 'import deduplicated') slices.push((fields as { slices?: unknown }).slices);
    },
  };
  await runImport(deps, accountId, id);
  const counts = await importRow(sql, accountId, id);
  const contacts = await sql<{ email: string; attributes: unknown; brands: string[] }[]>`
    select lower(c.email) as email, c.attributes, array(select b.name from brands b
                                        where b.account_id = c.account_id and b.id = any(c.brand_ids)
                                        order by b.name) as brands
    from contacts c where c.account_id = ${accountId} order by c.email_md5`;
  return { slices, counts, contacts };
}

test('a file staged in slices gives the contacts and counts of the same file staged whole', async () => {
  const whole = await importInto(undefined);
  const sliced = await importInto(4_000 * MB);
  expect(whole.slices).toEqual([1]);
  expect(sliced.slices).toEqual([stagingSlices(4_000 * MB)]);
  expect(stagingSlices(4_000 * MB)).toBeGreaterThan(MERGE_PARTS);

  const expected = {
    status: 'success',
    rowCount: 2_400,
    addedCount: 2_400,
    updatedCount: 0,
    skippedCount: 0,
    malformedCount: 100,
    duplicateInFileCount: 500,
  };
  expect(whole.counts).toMatchObject(expected);
  expect(sliced.counts).toMatchObject(expected);
  expect(sliced.contacts).toHaveLength(2_400);
  expect(sliced.contacts).toEqual(whole.contacts);
  // The last row of a repeated email won, in both.
  const user4 = sliced.contacts.find((c) => c.email === 'user4@example.com');
  expect(user4?.attributes).toEqual({ firstName: 'Again 1', score: -1 });
});

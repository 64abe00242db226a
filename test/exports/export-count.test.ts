/**
 * The rows an export will write, counted beside its COPY (worker/exports/count.ts): exact for every
 * filter, only the account's own contacts, and the one-backend settings left behind on no connection.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect, type Sql } from '../../src/db';
import { countRows } from '../../worker/exports/count';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { createAccount, createBrand } from '../helpers/fixtures';

describe('countRows', () => {
  let db: TestDatabase;
  let one: Sql;
  let accountId: string;
  let red: string;
  let blue: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    // A pool of one connection: what the count set, the next statement would see.
    one = connect(db.url, 1);
    accountId = await createAccount(db.sql);
    const other = await createAccount(db.sql, 'Other');
    red = await createBrand(db.sql, accountId, 'Red');
    blue = await createBrand(db.sql, accountId, 'Blue');
    // 40 contacts: every 4th disabled, the even ones red, every 5th blue too; 7 in another account.
    await db.sql`
      insert into contacts (account_id, email_md5, email, attributes, first_source, enabled, brand_ids)
      select ${accountId}, md5('c' || i || '@example.com')::uuid, 'c' || i || '@example.com', '{}', 'import',
        i % 4 <> 0,
        case when i % 2 = 0 then array[${red}::uuid] else '{}' end
          || case when i % 5 = 0 then array[${blue}::uuid] else '{}' end
      from generate_series(1, 40) i`;
    await db.sql`
      insert into contacts (account_id, email_md5, email, attributes, first_source)
      select ${other}, md5('o' || i || '@example.com')::uuid, 'o' || i || '@example.com', '{}', 'import'
      from generate_series(1, 7) i`;
  });

  afterAll(async () => {
    await one?.end();
    await db?.drop();
  });

  test('counts the contacts the filter selects, in the account only', async () => {
    expect(await countRows(one, accountId, { brandIds: null, enabled: null })).toBe(40);
    expect(await countRows(one, accountId, { brandIds: null, enabled: false })).toBe(10);
    expect(await countRows(one, accountId, { brandIds: null, enabled: true })).toBe(30);
    expect(await countRows(one, accountId, { brandIds: [red], enabled: null })).toBe(20);
    // Even or a multiple of 5: 20 + 4 odd multiples of 5 (5, 15, 25, 35).
    expect(await countRows(one, accountId, { brandIds: [red, blue], enabled: null })).toBe(24);
    // Multiples of 5 that are not multiples of 4: 5, 10, 15, 25, 30, 35.
    expect(await countRows(one, accountId, { brandIds: [blue], enabled: true })).toBe(6);
  });

  test("leaves the connection's settings as they were", async () => {
    const before =
      await one`select current_setting('max_parallel_workers_per_gather') as p, current_setting('jit') as j`;
    await countRows(one, accountId, { brandIds: null, enabled: null });
    const after =
      await one`select current_setting('max_parallel_workers_per_gather') as p, current_setting('jit') as j`;
    expect(after).toEqual(before);
    expect(after[0]!.p).not.toBe('0');
  });
});

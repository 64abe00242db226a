// dropAccountContacts: a truncate when the account holds every contact and event, else a delete that
// leaves every other account's rows as they were; and the schema an account of each shape gets.
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/db';
import { createBenchAccount, dropAccountContacts } from './account';
import { SHAPES } from './shapes';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => db.drop());

async function addContacts(accountId: string, n: number): Promise<void> {
  await db.sql`
    insert into contacts (account_id, email_md5, email, first_source)
    select ${accountId}::uuid, md5(${accountId} || i)::uuid, ${accountId} || i || '@example.com', 'import'
    from generate_series(1, ${n}) as i`;
  await db.sql`
    insert into brand_subscribe_events (account_id, brand_id, email_md5s, emails, source)
    values (${accountId}::uuid, gen_random_uuid(), array[md5(${accountId})::uuid], array['x@example.com'], 'import')`;
}

const count = async (table: string, accountId: string) =>
  Number((await db.sql.unsafe(`select count(*) as n from ${table} where account_id = $1`, [accountId]))[0]!.n);

test('with other accounts in the table: only the account goes, by delete', async () => {
  const [a, b] = [await createBenchAccount(db.sql, 'drop a'), await createBenchAccount(db.sql, 'drop b')];
  await addContacts(a.id, 50);
  await addContacts(b.id, 30);
  expect(await dropAccountContacts(db.sql, a.id)).toBe('deleted');
  expect(await count('contacts', a.id)).toBe(0);
  expect(await count('brand_subscribe_events', a.id)).toBe(0);
  expect(await count('contacts', b.id)).toBe(30);
  expect(await count('brand_subscribe_events', b.id)).toBe(1);
  // An event of another account alone is enough to keep the tables from a truncate.
  await db.sql`delete from contacts where account_id = ${b.id}`;
  await addContacts(a.id, 5);
  expect(await dropAccountContacts(db.sql, a.id)).toBe('deleted');
  expect(await count('brand_subscribe_events', b.id)).toBe(1);
  await db.sql`delete from brand_subscribe_events`;
});

test('alone in both tables: a truncate, which leaves the tables empty', async () => {
  const a = await createBenchAccount(db.sql, 'drop alone');
  await addContacts(a.id, 40);
  const [before] = await db.sql<{ node: number }[]>`select pg_relation_filenode('contacts') as node`;
  expect(await dropAccountContacts(db.sql, a.id)).toBe('truncated');
  const [after] = await db.sql<{ node: number }[]>`select pg_relation_filenode('contacts') as node`;
  expect(after!.node).not.toBe(before!.node);
  expect(Number((await db.sql`select count(*) as n from contacts`)[0]!.n)).toBe(0);
  expect(Number((await db.sql`select count(*) as n from brand_subscribe_events`)[0]!.n)).toBe(0);
});

test("a step's accounts together: a truncate when they hold every row, else a delete of theirs only", async () => {
  // Accounts with chosen ids, so that another account's rows sit before, between and after the two.
  const id = (lead: number) => `${lead}0000000-0000-4000-8000-000000000000`;
  for (const lead of [1, 2, 3, 4, 5])
    await db.sql`insert into accounts (id, name) values (${id(lead)}::uuid, ${`drop gap ${lead}`})`;
  const [a, b] = [id(2), id(4)];
  for (const other of [id(1), id(3), id(5)]) {
    await addContacts(a, 20);
    await addContacts(b, 10);
    await addContacts(other, 3);
    expect(await dropAccountContacts(db.sql, [a, b])).toBe('deleted');
    expect([await count('contacts', a), await count('contacts', b)]).toEqual([0, 0]);
    expect(await count('contacts', other)).toBe(3);
    await db.sql`delete from contacts where account_id = ${other}`;
    await db.sql`delete from brand_subscribe_events`;
  }
  await addContacts(a, 20);
  await addContacts(b, 10);
  expect(await dropAccountContacts(db.sql, [b, a])).toBe('truncated');
  expect(Number((await db.sql`select count(*) as n from contacts`)[0]!.n)).toBe(0);
});

test('an account of the narrow shape: its five attributes with their types, no brands', async () => {
  const a = await createBenchAccount(db.sql, 'narrow shape', SHAPES.narrow);
  const attributes = await db.sql<{ name: string; type: string }[]>`
    select name, type from schema_attributes where account_id = ${a.id} order by name`;
  expect(attributes.map((r) => [r.name, r.type])).toEqual([
    ['active', 'boolean'],
    ['backup_email', 'email'],
    ['labels', 'array'],
    ['nickname', 'string'],
    ['visits', 'number'],
  ]);
  expect(a.brandIds).toEqual([]);
  expect(Number((await db.sql`select count(*) as n from brands where account_id = ${a.id}`)[0]!.n)).toBe(0);
});

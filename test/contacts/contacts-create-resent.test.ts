// A create sent again after its database session was lost (src/http/lost-session.ts) whose first
// attempt had committed after all (a server killed between the commit and its answer, as in a
// failover) answers 201 as that attempt would have, once, with no second event; anything else that
// meets an existing contact answers as before.
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { createContact } from '../../src/contacts/service';
import { ApiError } from '../../src/errors';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { createAccount, createAttribute, createBrand } from '../helpers/fixtures';

let db: TestDatabase;
let accountId: string;
let brand: string;
let n = 0;

beforeAll(async () => {
  db = await createTestDatabase();
  accountId = await createAccount(db.sql);
  await createAttribute(db.sql, accountId, 'city', 'string');
  await createAttribute(db.sql, accountId, 'age', 'number');
  brand = await createBrand(db.sql, accountId, 'Alpha');
});
afterAll(() => db?.drop());

const body = (email: string, extra: Record<string, unknown> = {}) => ({
  email,
  attributes: { city: 'Oslo', age: 41.0 },
  brandIds: [brand],
  ...extra,
});

/** The code createContact refused with, or 'created' / 'merged'. */
async function outcome(b: ReturnType<typeof body>, resentAfterMs?: number): Promise<string> {
  try {
    const r = await createContact(db.sql, accountId, b as never, { resentAfterMs });
    return r.created ? 'created' : 'merged';
  } catch (e) {
    if (e instanceof ApiError) return e.code;
    throw e;
  }
}

const eventsFor = async (email: string) => {
  const [r] = await db.sql<{ n: number }[]>`
    select count(*)::int as n from brand_subscribe_events
    where account_id = ${accountId} and ${email} = any(emails)`;
  return r!.n;
};

test('a resent create that meets its own committed first attempt is created (201), with its one event', async () => {
  const email = `own.${++n}@example.com`;
  expect(await outcome(body(email))).toBe('created');
  expect(await outcome(body(email), 400)).toBe('created');
  // Attributes in another key order and number spelling are the same attributes.
  expect(await outcome({ ...body(email), attributes: { age: 41, city: 'Oslo' } }, 400)).toBe('created');
  expect(await eventsFor(email)).toBe(1);
  // Sent once (not resent), the same create is the conflict it always was.
  expect(await outcome(body(email))).toBe('contact_exists');
});

test('with a merge strategy, the resent create is still the 201 of its first attempt, not a 200', async () => {
  const email = `strategy.${++n}@example.com`;
  const b = body(email, { duplicateContactStrategy: 'overwrite' });
  expect(await outcome(b)).toBe('created');
  expect(await outcome(b, 400)).toBe('created');
  expect(await outcome(b)).toBe('merged');
  expect(await eventsFor(email)).toBe(1);
});

test('a contact that is not what the resent create would have made is the usual conflict', async () => {
  const other = `other.${++n}@example.com`;
  await outcome(body(other));
  expect(await outcome({ ...body(other), attributes: { city: 'Bergen', age: 41 } }, 400)).toBe('contact_exists');
  expect(await outcome({ ...body(other), brandIds: [] }, 400)).toBe('contact_exists');

  const written = `written.${++n}@example.com`;
  await outcome(body(written));
  // Written since it was created: not the first attempt's contact as it made it.
  await db.sql`
    update contacts set updated_at = ${new Date(Date.now() + 1000)}
    where account_id = ${accountId} and email = ${written}`;
  expect(await outcome(body(written), 400)).toBe('contact_exists');

  const old = `old.${++n}@example.com`;
  await outcome(body(old));
  // Made before the resent request's first attempt began (plus the second of slack). Literal times:
  // Citus refuses now() and timestamp arithmetic on columns in an UPDATE.
  const tenSecondsAgo = new Date(Date.now() - 10_000);
  await db.sql`
    update contacts set created_at = ${tenSecondsAgo}, updated_at = ${tenSecondsAgo}
    where account_id = ${accountId} and email = ${old}`;
  expect(await outcome(body(old), 400)).toBe('contact_exists');
  expect(await outcome(body(old), 20_000)).toBe('created');
});

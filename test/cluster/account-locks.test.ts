/**
 * The locks of an account's resources (src/db/locks.ts, accountXactLock) exclude each other whatever
 * node their takers are connected to: API replicas may connect to any node of the cluster
 * (docs/scaling-out.md), and advisory locks are per node, so each is taken on the node of the account's
 * shards. Checked from every pair of nodes, for a few accounts (their shards on either worker).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { connect, type Sql, accountXactLock, suppressionListLock, tryAccountXactLock } from '../../src/db';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { createAccount } from '../helpers/fixtures';

let db: TestDatabase;
let nodes: { name: string; sql: Sql }[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  if (db.workerUrls.length < 2) throw new Error('test/cluster/ runs on a Citus cluster of 2 workers');
  nodes = [
    { name: 'coordinator', sql: connect(db.url, 2) },
    ...db.workerUrls.map((url, k) => ({ name: `worker-${k + 1}`, sql: connect(url, 2) })),
  ];
});

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.sql.end({ timeout: 2 })));
  await db?.drop();
});

const LIST = '00000000-0000-4000-8000-000000000001';

/** Tries the account's lock in a transaction of its own on `sql`: whether it was free. */
async function tryLock(sql: Sql, account: string): Promise<boolean> {
  return sql.begin((tx) => tryAccountXactLock(tx, account, suppressionListLock(tx, account, LIST))) as Promise<boolean>;
}

/** Whether `other` can take the account's lock while `holder` holds it in an open transaction. */
async function takenWhileHeld(holder: Sql, other: Sql, account: string): Promise<boolean> {
  const held = await holder.reserve();
  try {
    await held`begin`;
    await accountXactLock(held, account, suppressionListLock(held, account, LIST));
    return await tryLock(other, account);
  } finally {
    await held`rollback`;
    held.release();
  }
}

test('an account lock held through one node is refused through every other, and free once released', async () => {
  const accounts = await Promise.all([1, 2, 3, 4].map((i) => createAccount(db.sql, `locks ${i}`)));
  for (const account of accounts)
    for (const a of nodes)
      for (const b of nodes) {
        expect({ account, from: a.name, to: b.name, taken: await takenWhileHeld(a.sql, b.sql, account) }).toEqual({
          account,
          from: a.name,
          to: b.name,
          taken: false,
        });
        expect(await tryLock(b.sql, account)).toBe(true);
      }
});

// Real parallel requests against real PostgreSQL, and the write guard against bulk operations
// (409 operation_in_progress with Retry-After; no single write interleaves with a bulk batch).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { drainContactWrites, exclusiveLock, holdContactWrites } from '../../src/contacts/write-guard';
import { expectProblem, type Call } from '../helpers/app';
import { createAttribute, createBrand } from '../helpers/fixtures';
import {
  CONTACT_PATHS,
  type ContactTestApp,
  contactTestApp,
  create,
  eventsOf,
  expectContactPath,
  md5,
  rowOf,
  startBulkOperation,
} from './contacts-support';

let t: ContactTestApp;
let brands: string[];
const names = ['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'a8'];
let n = 0;

const fresh = () => `cc.${++n}@example.com`;
const statuses = (calls: Call[]) => calls.map((c) => c.status).sort();
const countRows = async (email: string) =>
  (
    await t.db.sql<
      { n: number }[]
    >`select count(*)::int as n from contacts where account_id = ${t.accountId} and lower(email) = ${email}`
  )[0]!.n;

for (const path of CONTACT_PATHS) {
  describe(`${path} path`, () => {
    beforeAll(async () => {
      t = await contactTestApp(path);
      for (const name of names) await createAttribute(t.db.sql, t.accountId, name, 'string');
      brands = [];
      for (let i = 0; i < 8; i++) brands.push(await createBrand(t.db.sql, t.accountId, `Brand ${i}`));
    });
    afterAll(() => t.close());

    describe('parallel creates of the same new email', () => {
      test('without a strategy: exactly one 201, every other 409 contact_exists, one row', async () => {
        const email = fresh();
        const calls = await Promise.all(
          Array.from({ length: 12 }, () => t.call('POST', '/v1/contacts', { body: { email, brandIds: [brands[0]] } })),
        );
        expect(statuses(calls)).toEqual([201, ...Array(11).fill(409)]);
        for (const c of calls.filter((c) => c.status === 409)) expectProblem(c, 409, 'contact_exists');
        expect(await countRows(email)).toBe(1);
        expect(await eventsOf(t, email)).toEqual([brands[0]!]);
      });

      test('with overwrite: one 201, the rest 200; every attribute and brand survives; events per brand', async () => {
        const email = fresh();
        const calls = await Promise.all(
          names.map((name, i) =>
            t.call('POST', '/v1/contacts', {
              body: {
                email,
                duplicateContactStrategy: 'overwrite',
                attributes: { [name]: `v${i}` },
                brandIds: [brands[i]],
              },
            }),
          ),
        );
        expect(statuses(calls)).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
        const row = await rowOf(t, email);
        expect(row!.attributes).toEqual(Object.fromEntries(names.map((name, i) => [name, `v${i}`])));
        expect([...row!.brand_ids].sort()).toEqual([...brands].sort());
        expect((await eventsOf(t, email)).sort()).toEqual([...brands].sort());
      });

      test('with keep and skip mixed: one 201, the rest 200, never two rows', async () => {
        const email = fresh();
        const calls = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            t.call('POST', '/v1/contacts', {
              body: {
                email,
                duplicateContactStrategy: i % 2 ? 'keep' : 'skip',
                attributes: { a1: `v${i}` },
                brandIds: [brands[1]],
              },
            }),
          ),
        );
        expect(statuses(calls)).toEqual([...Array(9).fill(200), 201]);
        expect(await countRows(email)).toBe(1);
        expect(await eventsOf(t, email)).toEqual([brands[1]!]);
      });
    });

    describe('parallel writes to one contact lose nothing', () => {
      test('brand additions: every brand assigned once, one event each', async () => {
        const email = fresh();
        await create(t, { email });
        const calls = await Promise.all(
          brands.flatMap((b, i) => [
            t.call('POST', `/v1/contacts/${md5(email)}/brands`, { body: { brandIds: [b] } }),
            t.call('POST', `/v1/contacts/${md5(email)}/subscriptions`, {
              body: { brandIds: [b, brands[(i + 1) % brands.length]] },
            }),
          ]),
        );
        expect(calls.filter((c) => c.status !== 200)).toEqual([]);
        const row = await rowOf(t, email);
        expect([...row!.brand_ids].sort()).toEqual([...brands].sort());
        expect((await eventsOf(t, email)).sort()).toEqual([...brands].sort());
      });

      test('patches of different attributes all survive', async () => {
        const email = fresh();
        await create(t, { email, attributes: { a8: 'keep me' } });
        const calls = await Promise.all(
          names
            .slice(0, 7)
            .map((name) => t.call('PATCH', `/v1/contacts/${md5(email)}`, { body: { attributes: { [name]: name } } })),
        );
        expect(calls.every((c) => c.status === 200)).toBe(true);
        expect((await rowOf(t, email))!.attributes).toEqual({
          ...Object.fromEntries(names.slice(0, 7).map((x) => [x, x])),
          a8: 'keep me',
        });
      });

      test('patches, brand additions, removals and merges interleaved: each effect applied', async () => {
        const email = fresh();
        await create(t, { email, brandIds: [brands[7]] });
        const calls = await Promise.all([
          t.call('PATCH', `/v1/contacts/${md5(email)}`, { body: { attributes: { a1: 'p' } } }),
          t.call('POST', '/v1/contacts', {
            body: { email, duplicateContactStrategy: 'keep', attributes: { a2: 'k' } },
          }),
          t.call('POST', `/v1/contacts/${md5(email)}/brands`, { body: { brandIds: [brands[2]] } }),
          t.call('DELETE', `/v1/contacts/${md5(email)}/brands/${brands[7]}`),
          t.call('POST', '/v1/contacts', {
            body: { email, duplicateContactStrategy: 'overwrite', attributes: { a3: 'o' }, brandIds: [brands[3]] },
          }),
        ]);
        expect(statuses(calls)).toEqual([200, 200, 200, 200, 204]);
        const row = await rowOf(t, email);
        expect(row!.attributes).toEqual({ a1: 'p', a2: 'k', a3: 'o' });
        expect([...row!.brand_ids].sort()).toEqual([brands[2]!, brands[3]!].sort());
      });

      test('parallel removals of the same brand: one 204, the rest 400 not assigned', async () => {
        const email = fresh();
        await create(t, { email, brandIds: [brands[4], brands[5]] });
        const calls = await Promise.all(
          Array.from({ length: 6 }, () => t.call('DELETE', `/v1/contacts/${md5(email)}/brands/${brands[4]}`)),
        );
        expect(statuses(calls)).toEqual([204, 400, 400, 400, 400, 400]);
        expect((await rowOf(t, email))!.brand_ids).toEqual([brands[5]!]);
      });
    });

    describe('409 operation_in_progress while a bulk contact operation runs', () => {
      const writes = (email: string) => [
        () => t.call('POST', '/v1/contacts', { body: { email: fresh() } }),
        () =>
          t.call('POST', '/v1/contacts', {
            body: { email, duplicateContactStrategy: 'overwrite', attributes: { a1: 'x' } },
          }),
        () => t.call('PATCH', `/v1/contacts/${md5(email)}`, { body: { attributes: { a1: 'x' } } }),
        () => t.call('POST', `/v1/contacts/${md5(email)}/brands`, { body: { brandIds: [brands[1]] } }),
        () => t.call('POST', `/v1/contacts/${md5(email)}/subscriptions`, { body: { brandIds: [brands[1]] } }),
        () => t.call('DELETE', `/v1/contacts/${md5(email)}/brands/${brands[0]}`),
        () => t.call('DELETE', `/v1/contacts/${md5(email)}/subscriptions/${brands[0]}`),
        () => t.call('POST', `/v1/contacts/${md5(email)}/disable`),
      ];

      for (const kind of ['contact-import', 'schema-change'] as const) {
        test(`${kind}: every contact write is refused with Retry-After, and changes nothing`, async () => {
          const email = fresh();
          await create(t, { email, brandIds: [brands[0]] });
          const before = await rowOf(t, email);
          const end = await startBulkOperation(t, kind, 90);
          try {
            for (const write of writes(email)) {
              const res = await write();
              expectProblem(res, 409, 'operation_in_progress');
              const retryAfter = Number(res.headers.get('retry-after'));
              expect(retryAfter).toBeGreaterThanOrEqual(89);
              expect(retryAfter).toBeLessThanOrEqual(90);
            }
            expect(await rowOf(t, email)).toEqual(before);
            expect(await eventsOf(t, email)).toEqual([brands[0]!]);
            // Reads are not held.
            expect((await t.call('GET', `/v1/contacts/${md5(email)}`)).status).toBe(200);
            expect((await t.call('GET', `/v1/contacts/${md5(email)}/brands`)).status).toBe(200);
          } finally {
            await end();
          }
          const after: number[] = [];
          for (const write of writes(email)) after.push((await write()).status);
          // The brand is removed through /brands, so the same removal through /subscriptions is 400.
          expect(after).toEqual([201, 200, 200, 200, 200, 204, 400, 200]);
        });
      }

      test('an overdue estimate still asks for at least 1 second', async () => {
        const end = await startBulkOperation(t, 'contact-import', -30);
        try {
          const res = await t.call('POST', '/v1/contacts', { body: { email: fresh() } });
          expectProblem(res, 409, 'operation_in_progress');
          expect(res.headers.get('retry-after')).toBe('1');
        } finally {
          await end();
        }
      });

      test('400 and 404 come before the 409 (order of checks)', async () => {
        const email = fresh();
        await create(t, { email, brandIds: [brands[0]] });
        const end = await startBulkOperation(t, 'contact-import', 60);
        try {
          expectProblem(
            await t.call('PATCH', `/v1/contacts/${md5('nobody@example.com')}`, { body: { attributes: {} } }),
            404,
            'not_found_error',
          );
          expectProblem(
            await t.call('PATCH', `/v1/contacts/${md5(email)}`, { body: { attributes: { nope: 1 } } }),
            400,
            'invalid_request_error',
          );
          expectProblem(
            await t.call('POST', '/v1/contacts', { body: { email: fresh(), brandIds: [crypto.randomUUID()] } }),
            400,
            'invalid_request_error',
          );
          expectProblem(
            await t.call('POST', `/v1/contacts/${md5(email)}/brands`, { body: { brandIds: [crypto.randomUUID()] } }),
            400,
            'invalid_request_error',
          );
          expectProblem(
            await t.call('DELETE', `/v1/contacts/${md5(email)}/brands/${brands[3]}`),
            400,
            'invalid_request_error',
          );
          expectProblem(
            await t.call('POST', `/v1/contacts/${md5('nobody@example.com')}/disable`),
            404,
            'not_found_error',
          );
        } finally {
          await end();
        }
      });

      test('another account’s bulk operation does not hold this account', async () => {
        const [other] = await t.db.sql<{ id: string }[]>`insert into accounts (name) values ('B') returning id`;
        await t.db.sql`
            insert into bulk_operations (account_id, id, kind, estimated_end)
            values (${other!.id}, ${crypto.randomUUID()}, 'contact-import', now() + interval '1 hour')`;
        expect((await t.call('POST', '/v1/contacts', { body: { email: fresh() } })).status).toBe(201);
      });
    });

    describe('no single write interleaves with a bulk batch', () => {
      /** Holds the account's exclusive advisory lock, as a bulk batch does, until release() is called. */
      function holdBatchLock(withOperationRow: boolean) {
        let release!: () => void;
        const released = new Promise<void>((r) => (release = r));
        let locked!: () => void;
        const isLocked = new Promise<void>((r) => (locked = r));
        const done = t.db.sql.begin(async (tx) => {
          if (withOperationRow) {
            await tx`
              insert into bulk_operations (account_id, id, kind, estimated_end)
              values (${t.accountId}, ${crypto.randomUUID()}, 'contact-import', now() + interval '30 seconds')`;
          }
          await tx`select ${exclusiveLock(tx, t.accountId)}`;
          locked();
          await released;
          // The batch ends with the operation: its row goes in the same commit.
          if (withOperationRow) await tx`delete from bulk_operations where account_id = ${t.accountId}`;
        });
        return { isLocked, release: async () => (release(), await done) };
      }

      async function waitFor(check: () => Promise<boolean>) {
        for (let i = 0; i < 100; i++) {
          if (await check()) return;
          await Bun.sleep(50);
        }
        throw new Error('condition not reached in 5 s');
      }

      const pendingAfter = (p: Promise<unknown>, ms: number) =>
        Promise.race([p.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), ms))]);

      test('a write arriving during a batch waits for the batch to commit, then runs', async () => {
        const email = fresh();
        const batch = holdBatchLock(false);
        await batch.isLocked;
        try {
          const write = t.call('POST', '/v1/contacts', { body: { email } });
          expect(await pendingAfter(write, 400)).toBe(true);
          expect(await rowOf(t, email)).toBeUndefined();
          await batch.release();
          expect((await write).status).toBe(201);
        } finally {
          await batch.release();
        }
      });

      test('a write arriving while a committed bulk operation holds a batch is refused at once', async () => {
        const email = fresh();
        const end = await startBulkOperation(t, 'contact-import', 30);
        const batch = holdBatchLock(false);
        await batch.isLocked;
        try {
          const write = t.call('POST', '/v1/contacts', { body: { email } });
          expect(await pendingAfter(write, 2000)).toBe(false);
          expectProblem(await write, 409, 'operation_in_progress');
        } finally {
          await batch.release();
          await end();
        }
      });

      test('a bulk operation recorded while a write waits for a batch refuses it when the batch ends', async () => {
        // The one-statement writes (src/contacts/fast-path.ts) check for the operation again after the
        // lock with a fresh snapshot; the statement's own snapshot, taken before the wait, would miss it.
        const existing = fresh();
        await create(t, { email: existing });
        const writes = [
          () => t.call('POST', '/v1/contacts', { body: { email: fresh() } }),
          () => t.call('PATCH', `/v1/contacts/${md5(existing)}`, { body: { attributes: { a1: 'late' } } }),
        ];
        for (let round = 0; round < 5; round++) {
          for (const write of writes) {
            const batch = holdBatchLock(false);
            await batch.isLocked;
            let end: (() => Promise<void>) | undefined;
            try {
              const res = write();
              expect(await pendingAfter(res, 300)).toBe(true);
              end = await startBulkOperation(t, 'contact-import', 30);
              await batch.release();
              expectProblem(await res, 409, 'operation_in_progress');
            } finally {
              await batch.release();
              await end?.();
            }
          }
        }
        expect((await rowOf(t, existing))!.attributes).toEqual({});
        expect(
          (await t.db.sql`select 1 from contacts where account_id = ${t.accountId} and attributes->>'a1' = 'late'`)
            .length,
        ).toBe(0);
      });

      test('a drain goes on only once its own hold is visible where it takes the lock', async () => {
        // On Citus a hold commits on every node in two phases: a node that failed between them sees
        // it only after recovery, and its single writes would not see it either (sql/migrations/0018).
        const hold = crypto.randomUUID();
        const refused = await drainContactWrites(t.db.sql, t.accountId, hold).then(
          () => 'drained',
          (e: { code?: string }) => e.code,
        );
        expect(refused).toBe('55000');
        await holdContactWrites(t.db.sql, t.accountId, hold, 'contact-import', 30);
        try {
          await drainContactWrites(t.db.sql, t.accountId, hold);
        } finally {
          await t.db.sql`delete from bulk_operations where account_id = ${t.accountId} and id = ${hold}`;
        }
      });

      test('a write in flight holds the batch off until it commits', async () => {
        const email = fresh();
        await create(t, { email });
        // Hold the contact's row so that a PATCH stops inside its guarded transaction.
        let unlockRow!: () => void;
        const rowReleased = new Promise<void>((r) => (unlockRow = r));
        let rowLocked!: () => void;
        const isRowLocked = new Promise<void>((r) => (rowLocked = r));
        const holder = t.db.sql.begin(async (tx) => {
          await tx`select 1 from contacts where account_id = ${t.accountId} and email = ${email} for update`;
          rowLocked();
          await rowReleased;
        });
        await isRowLocked;
        const write = t.call('PATCH', `/v1/contacts/${md5(email)}`, { body: { attributes: { a1: 'in flight' } } });
        let batch: ReturnType<typeof holdBatchLock> | undefined;
        try {
          // On Citus the PATCH waits on the worker that holds the account's shard: the cluster-wide view.
          const [{ citus } = { citus: false }] = await t.db.sql<{ citus: boolean }[]>`
            select to_regclass('citus_stat_activity') is not null as citus`;
          const activity = t.db.sql(citus ? 'citus_stat_activity' : 'pg_stat_activity');
          await waitFor(
            async () =>
              (
                await t.db.sql`
                    select 1 from ${activity}
                    where datname = current_database() and wait_event_type = 'Lock'
                      and query ilike '%update %contacts%'`
              ).length > 0,
          );
          batch = holdBatchLock(true);
          expect(await pendingAfter(batch.isLocked, 400)).toBe(true);
          unlockRow();
          expect((await write).status).toBe(200);
          await batch.isLocked;
          expect((await rowOf(t, email))!.attributes).toEqual({ a1: 'in flight' });
        } finally {
          unlockRow();
          await holder;
          await batch?.release();
        }
      });
    });

    test('the requests took the path', () => expectContactPath(t));
  });
}

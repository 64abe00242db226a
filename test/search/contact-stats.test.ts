// The contact tallies behind GET /v1/contact-stats (sql/migrations/0019_contact_tallies.sql,
// src/search/stats.ts): after every kind of write of contacts (single writes on the fast and the
// plain path, merge-creates, disables, brand changes, erasures, imports of every strategy, writers
// at once) the stats equal a recount of the contacts, exactly, and accounts never mix.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadConfig } from '../../src/config';
import { migrate } from '../../src/migrate';
import { connect, type Sql } from '../../src/db';
import { compactBusyTallies, compactContactTallies, COMPACT_READ_AT, contactStats } from '../../src/search/stats';
import { runImport } from '../../worker/import';
import { CONTACT_PATHS, type ContactTestApp, contactTestApp, create, disable, md5 } from '../contacts/contacts-support';
import type { TestApp } from '../helpers/app';
import { createAccount, createAttribute, createBrand, createKey } from '../helpers/fixtures';
import { testServices, withDatabase } from '../helpers/services';
import { uploadBed } from '../helpers/upload-bed';

/** The stats as a recount of the account's contacts would give them. */
async function recount(sql: Sql, accountId: string) {
  const [totals] = await sql<{ total: number; enabled: number }[]>`
    select count(*)::int as total, (count(*) filter (where enabled))::int as enabled
    from contacts where account_id = ${accountId}`;
  const brands = await sql<{ brandId: string; count: number }[]>`
    select b.id as "brandId",
           (select count(*)::int from contacts c
            where c.account_id = b.account_id and b.id = any (c.brand_ids)) as count
    from brands b
    where b.account_id = ${accountId} and b.deleted_at is null
    order by lower(b.name), b.name, b.id`;
  return { total: totals!.total, enabled: totals!.enabled, disabled: totals!.total - totals!.enabled, brands };
}

/** The tallies' sums per brand id, deleted brands' included, against the contacts' brand ids. */
async function expectBrandSums(sql: Sql, accountId: string) {
  const tallied = await sql<{ id: string; n: number }[]>`
    select brand_id as id, sum(contacts)::int as n from contact_tallies
    where account_id = ${accountId} and brand_id is not null
    group by brand_id having sum(contacts) <> 0 order by 1`;
  const counted = await sql<{ id: string; n: number }[]>`
    select b.id, count(*)::int as n from contacts c cross join unnest(c.brand_ids) as b(id)
    where c.account_id = ${accountId} group by b.id order by 1`;
  expect(tallied).toEqual(counted);
}

async function expectTallied(sql: Sql, accountId: string) {
  expect(await contactStats(sql, accountId)).toEqual(await recount(sql, accountId));
  await expectBrandSums(sql, accountId);
}

const deltaRows = async (sql: Sql, accountId: string) =>
  Number((await sql`select count(*) as n from contact_tallies where account_id = ${accountId}`)[0]!.n);

for (const path of CONTACT_PATHS) {
  describe(`single writes, ${path} path`, () => {
    let t: ContactTestApp;
    let other: string;
    let b1: string;
    let b2: string;
    let b3: string;
    let n = 0;
    const email = () => `s.${++n}@example.com`;
    const call = (method: string, url: string, body?: unknown) => t.call(method, url, { body });
    const expectOk = async (method: string, url: string, body?: unknown) => {
      const res = await call(method, url, body);
      if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(res.body)}`);
      return res;
    };

    beforeAll(async () => {
      t = await contactTestApp(path);
      await createAttribute(t.db.sql, t.accountId, 'city', 'string');
      b1 = await createBrand(t.db.sql, t.accountId, 'beta');
      b2 = await createBrand(t.db.sql, t.accountId, 'Alpha');
      b3 = await createBrand(t.db.sql, t.accountId, 'Gamma');
      // Another account with contacts of its own, written beside this one's.
      other = await createAccount(t.db.sql, 'Other');
      const otherKey = await createKey(t.db.sql, other);
      const otherBrand = await createBrand(t.db.sql, other, 'Alpha');
      for (let i = 0; i < 3; i++) {
        const res = await t.call('POST', '/v1/contacts', {
          key: otherKey,
          body: { email: `o.${i}@example.com`, brandIds: [otherBrand] },
        });
        expect(res.status).toBe(201);
      }
    });
    afterAll(() => t.close());

    test('a new account: zero, and every live brand with 0, in the brands listing order', async () => {
      const stats = await contactStats(t.db.sql, t.accountId);
      expect(stats).toEqual({
        total: 0,
        enabled: 0,
        disabled: 0,
        brands: [
          { brandId: b2, count: 0 },
          { brandId: b1, count: 0 },
          { brandId: b3, count: 0 },
        ],
      });
    });

    test('creates, with and without brands', async () => {
      await create(t, { email: email() });
      await create(t, { email: email(), brandIds: [b1] });
      await create(t, { email: email(), brandIds: [b1, b2], attributes: { city: 'Oslo' } });
      const stats = await contactStats(t.db.sql, t.accountId);
      expect(stats.total).toBe(3);
      expect(stats.brands.find((b) => b.brandId === b1)!.count).toBe(2);
      await expectTallied(t.db.sql, t.accountId);
    });

    test('a create of an existing email that changes nothing, and one refused, tally nothing', async () => {
      const e = email();
      await create(t, { email: e, brandIds: [b1] });
      const rows = await deltaRows(t.db.sql, t.accountId);
      expect((await call('POST', '/v1/contacts', { email: e, duplicateContactStrategy: 'keep' })).status).toBe(200);
      expect((await call('POST', '/v1/contacts', { email: e })).status).toBe(409);
      expect(await deltaRows(t.db.sql, t.accountId)).toBe(rows);
      await expectTallied(t.db.sql, t.accountId);
    });

    test('merge-creates that add brands, replace them, and re-enable', async () => {
      const e1 = email();
      await create(t, { email: e1, brandIds: [b1] });
      await expectOk('POST', '/v1/contacts', { email: e1, duplicateContactStrategy: 'overwrite', brandIds: [b2] });
      const e2 = email();
      await create(t, { email: e2, brandIds: [b1, b2] });
      await expectOk('POST', '/v1/contacts', {
        email: e2,
        duplicateContactStrategy: 'overwrite',
        overwriteBrands: true,
        brandIds: [b3],
      });
      const e3 = email();
      await create(t, { email: e3, brandIds: [b1] });
      await disable(t, e3);
      await expectTallied(t.db.sql, t.accountId);
      await expectOk('POST', '/v1/contacts', {
        email: e3,
        duplicateContactStrategy: 'keep',
        restoreDisabled: true,
        brandIds: [b2],
      });
      const e4 = email();
      await create(t, { email: e4 });
      await disable(t, e4);
      await expectOk('POST', '/v1/contacts', {
        email: e4,
        duplicateContactStrategy: 'skip',
        restoreDisabled: true,
        brandIds: [b3],
      });
      await expectTallied(t.db.sql, t.accountId);
    });

    test('disables, twice', async () => {
      const e = email();
      await create(t, { email: e, brandIds: [b2] });
      await disable(t, e);
      await disable(t, e);
      const stats = await contactStats(t.db.sql, t.accountId);
      expect(stats.disabled).toBeGreaterThan(0);
      await expectTallied(t.db.sql, t.accountId);
    });

    test('a PATCH of attributes appends no delta', async () => {
      const e = email();
      await create(t, { email: e, brandIds: [b1] });
      const rows = await deltaRows(t.db.sql, t.accountId);
      await expectOk('PATCH', `/v1/contacts/${md5(e)}`, { attributes: { city: 'Rome' } });
      expect(await deltaRows(t.db.sql, t.accountId)).toBe(rows);
      await expectTallied(t.db.sql, t.accountId);
    });

    for (const segment of ['brands', 'subscriptions']) {
      test(`brand adds and removals under /${segment}`, async () => {
        const e = email();
        await create(t, { email: e, brandIds: [b1] });
        await expectOk('POST', `/v1/contacts/${md5(e)}/${segment}`, { brandIds: [b2, b3] });
        await expectOk('POST', `/v1/contacts/${md5(e)}/${segment}`, { brandIds: [b2] });
        await expectTallied(t.db.sql, t.accountId);
        await expectOk('DELETE', `/v1/contacts/${md5(e)}/${segment}/${b1}`);
        await expectOk('DELETE', `/v1/contacts/${md5(e)}/${segment}/${b3}`);
        await expectTallied(t.db.sql, t.accountId);
      });
    }

    test('erasures, one and several', async () => {
      const [e1, e2, e3] = [email(), email(), email()];
      await create(t, { email: e1, brandIds: [b1] });
      await create(t, { email: e2, brandIds: [b1, b2] });
      await create(t, { email: e3 });
      await disable(t, e3);
      await expectOk('DELETE', `/v1/contacts/${md5(e1)}`);
      await expectOk('POST', '/v1/contact-erasures', { emailMd5s: [md5(e2), md5(e3), md5('none@example.com')] });
      await expectTallied(t.db.sql, t.accountId);
    });

    test('a deleted brand leaves the stats; its id still counts on its contacts', async () => {
      const gone = await createBrand(t.db.sql, t.accountId, 'Deleted');
      await create(t, { email: email(), brandIds: [gone] });
      await t.db.sql`update brands set deleted_at = now() where account_id = ${t.accountId} and id = ${gone}`;
      const stats = await contactStats(t.db.sql, t.accountId);
      expect(stats.brands.map((b) => b.brandId)).not.toContain(gone);
      await expectTallied(t.db.sql, t.accountId);
    });

    test('writers at once, with compactions among them', async () => {
      const emails = Array.from({ length: 24 }, email);
      await Promise.all(emails.map((e, i) => create(t, { email: e, brandIds: i % 2 ? [b1] : [b2, b3] })));
      await Promise.all([
        ...emails.map((e, i) => {
          if (i % 4 === 0) return disable(t, e);
          if (i % 4 === 1) return expectOk('POST', `/v1/contacts/${md5(e)}/brands`, { brandIds: [b3] });
          if (i % 4 === 2) return expectOk('PATCH', `/v1/contacts/${md5(e)}`, { attributes: { city: `c${i}` } });
          return expectOk('DELETE', `/v1/contacts/${md5(e)}`);
        }),
        compactContactTallies(t.db.sql, t.accountId),
        compactContactTallies(t.db.sql, t.accountId),
      ]);
      await expectTallied(t.db.sql, t.accountId);
    });

    test('compaction sums the deltas into a row per brand id and one for the totals', async () => {
      const before = await contactStats(t.db.sql, t.accountId);
      await Promise.all([
        compactContactTallies(t.db.sql, t.accountId),
        compactContactTallies(t.db.sql, t.accountId),
        compactBusyTallies(t.db.sql),
      ]);
      expect(await contactStats(t.db.sql, t.accountId)).toEqual(before);
      const ids = await t.db.sql`
        select count(*)::int as n, count(distinct brand_id)::int as brands,
               (count(*) filter (where brand_id is null))::int as totals
        from contact_tallies where account_id = ${t.accountId}`;
      expect(ids[0]!.n).toBe(ids[0]!.brands + ids[0]!.totals);
      expect(ids[0]!.totals).toBe(1);
      await expectTallied(t.db.sql, t.accountId);
    });

    test('a read that finds many deltas compacts them', async () => {
      await t.db.sql`
        insert into contact_tallies (account_id, brand_id, contacts, enabled)
        select ${t.accountId}::uuid, null, 0, 0 from generate_series(1, ${COMPACT_READ_AT + 1})`;
      const stats = await contactStats(t.db.sql, t.accountId);
      expect(stats).toEqual(await recount(t.db.sql, t.accountId));
      expect(await deltaRows(t.db.sql, t.accountId)).toBeLessThan(10);
    });

    test("on a cluster the stats statement runs on the account's node as one task", async () => {
      const [citus] = await t.db.sql`select 1 from pg_extension where extname = 'citus'`;
      if (!citus) return; // one PostgreSQL: nothing to route
      const sent: { query: string; params: unknown[] }[] = [];
      const sql = connect(t.db.url, 1, { debug: (_c, query, params) => sent.push({ query, params: [...params] }) });
      try {
        await contactStats(sql, t.accountId);
        const [stats] = sent.filter((x) => /\bcontact_tallies\b/.test(x.query));
        const rows = await t.db.sql.unsafe(`explain (costs off) ${stats!.query}`, stats!.params as never[]);
        const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
        expect(plan).toMatch(/Task Count: 1\n/);
        expect(plan).not.toMatch(/Distributed Subplan|repartition|pull to coordinator/i);
      } finally {
        await sql.end();
      }
    });

    test("the other account's tallies are its own", async () => {
      const stats = await contactStats(t.db.sql, other);
      expect(stats).toEqual(await recount(t.db.sql, other));
      expect(stats.total).toBe(3);
    });
  });
}

describe('imports', () => {
  const bed = uploadBed('contact-stats');
  let t: TestApp;
  let key: string;
  let account: string;
  let brands: string[];
  const HEADER = 'Email,Brand,city';

  beforeAll(async () => {
    t = bed.t;
    account = t.accountId;
    key = t.key;
    await createAttribute(t.db.sql, account, 'city', 'string');
    brands = [
      await createBrand(t.db.sql, account, 'Red'),
      await createBrand(t.db.sql, account, 'Green'),
      await createBrand(t.db.sql, account, 'Blue'),
    ];
  });

  /** Runs one import of `rows` (batches of 3 rows: several batches, both batch statements). */
  async function importRows(rows: string[], options: Record<string, unknown>) {
    const res = await t.call('POST', '/v1/contact-imports', {
      key,
      body: { columns: HEADER.split(','), ...options },
    });
    expect(res.status).toBe(201);
    const body = [HEADER, ...rows].join('\n') + '\n';
    expect((await bed.put(new Request(res.body.uploadUrl, { method: 'PUT', body }))).status).toBe(200);
    const config = loadConfig({ IMPORT_BATCH_SIZE: '3', DATA_DIR: bed.dir, STORAGE_DRIVER: 'local' });
    await runImport({ sql: t.db.sql, storage: bed.store, config, log: () => {} }, account, res.body.id);
    const done = await t.call('GET', `/v1/contact-imports/${res.body.id}`, { key });
    expect(done.body.status).toBe('success');
  }

  const row = (i: number, brandNames: string, city: string) => `i.${i}@example.com,${brandNames},${city}`;

  test('a fresh import (adds only), with and without brands', async () => {
    await importRows(
      Array.from({ length: 20 }, (_, i) => row(i, ['', 'Red', 'Red;Green', 'blue;Blue'][i % 4]!, `c${i}`)),
      { duplicateContactStrategy: 'overwrite' },
    );
    expect((await contactStats(t.db.sql, account)).total).toBe(20);
    await expectTallied(t.db.sql, account);
  });

  test('adds without events: the brands counted by the batch itself', async () => {
    await importRows(
      Array.from({ length: 10 }, (_, i) => row(100 + i, ['', 'Green', 'Red;Blue'][i % 3]!, `n${i}`)),
      { duplicateContactStrategy: 'overwrite', publishBrandSubscribeEvents: false },
    );
    expect((await contactStats(t.db.sql, account)).total).toBe(30);
    await expectTallied(t.db.sql, account);
  });

  test('single writes between imports: disables, brand changes, a create', async () => {
    for (const i of [1, 2, 3, 30]) {
      if (i === 30) {
        expect(
          (await t.call('POST', '/v1/contacts', { body: { email: `i.${i}@example.com`, brandIds: [brands[2]] } }))
            .status,
        ).toBe(201);
        continue;
      }
      expect((await t.call('POST', `/v1/contacts/${md5(`i.${i}@example.com`)}/disable`)).status).toBe(200);
    }
    await expectTallied(t.db.sql, account);
  });

  test('overwrite with overwriteBrands, over new and existing contacts, without events', async () => {
    await importRows(
      Array.from({ length: 26 }, (_, i) => row(i, ['Green', '', 'Blue;Red', 'Red'][i % 4]!, `o${i}`)),
      { duplicateContactStrategy: 'overwrite', overwriteBrands: true, publishBrandSubscribeEvents: false },
    );
    await expectTallied(t.db.sql, account);
  });

  test('overwrite adding brands; keep and skip without events (new rows too)', async () => {
    await importRows(
      Array.from({ length: 12 }, (_, i) => row(i, 'Blue', `a${i}`)),
      { duplicateContactStrategy: 'overwrite' },
    );
    await expectTallied(t.db.sql, account);
    await importRows(
      Array.from({ length: 30 }, (_, i) => row(i, 'Green', `k${i}`)),
      { duplicateContactStrategy: 'keep', publishBrandSubscribeEvents: false },
    );
    await expectTallied(t.db.sql, account);
    await importRows(
      Array.from({ length: 46 }, (_, i) => row(i, 'Red', `s${i}`)),
      { duplicateContactStrategy: 'skip', publishBrandSubscribeEvents: false },
    );
    await expectTallied(t.db.sql, account);
  });

  test('restoreDisabled re-enables, under overwrite (brands added) and skip (brands replaced)', async () => {
    for (const i of [4, 5, 6, 7, 8, 9])
      expect((await t.call('POST', `/v1/contacts/${md5(`i.${i}@example.com`)}/disable`)).status).toBe(200);
    await expectTallied(t.db.sql, account);
    await importRows([row(1, 'Green', 'r1'), row(2, '', 'r2'), row(4, 'Blue', 'r4'), row(5, '', 'r5')], {
      duplicateContactStrategy: 'overwrite',
      restoreDisabled: true,
    });
    await expectTallied(t.db.sql, account);
    await importRows([row(3, 'Red;Green', 'r3'), row(6, 'Blue', 'r6'), row(7, '', 'r7'), row(40, 'Red', 'n')], {
      duplicateContactStrategy: 'skip',
      restoreDisabled: true,
    });
    const stats = await contactStats(t.db.sql, account);
    expect(stats.disabled).toBe(2); // 8 and 9
    await expectTallied(t.db.sql, account);
  });

  test('erasing imported contacts', async () => {
    const res = await t.call('POST', '/v1/contact-erasures', {
      body: { emailMd5s: [0, 1, 2, 8].map((i) => md5(`i.${i}@example.com`)) },
    });
    expect(res.status).toBe(200);
    await expectTallied(t.db.sql, account);
  });
});

test('the migration counts the contacts already there', async () => {
  const MIGRATIONS = resolve(import.meta.dir, '../../sql/migrations');
  const name = `test_tally_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const { adminUrl } = await testServices();
  const admin = connect(adminUrl, 1);
  await admin.unsafe(`create database ${name}`);
  const db = connect(withDatabase(adminUrl, name), 2);
  const before = await mkdtemp(join(tmpdir(), 'migrations-'));
  try {
    for (const file of await readdir(MIGRATIONS))
      if (file < '0019') await cp(join(MIGRATIONS, file), join(before, file));
    await migrate(db, undefined, before);
    const accounts = [await createAccount(db, 'One'), await createAccount(db, 'Two')];
    for (const [k, account] of accounts.entries()) {
      const brands = [await createBrand(db, account, 'A'), await createBrand(db, account, 'B')];
      await db`
        insert into contacts (account_id, email_md5, email, brand_ids, enabled, first_source)
        select ${account}, md5(n || '@example.com')::uuid, n || '@example.com',
               case n % 3 when 0 then '{}' when 1 then array[${brands[0]!}::uuid] else ${db.array(brands)}::uuid[] end,
               n % 5 <> 0, 'import'
        from generate_series(1, ${50 + k * 25}) n`;
    }
    await migrate(db);
    for (const account of accounts) await expectTallied(db, account);
    expect((await contactStats(db, accounts[1]!)).total).toBe(75);
  } finally {
    await db.end({ timeout: 2 });
    await admin.unsafe(`drop database if exists ${name} with (force)`).finally(() => admin.end());
    await rm(before, { recursive: true, force: true });
  }
});

/**
 * Migration 0007 (brand-subscribe events stored as sets) applied to a database that holds an
 * old-shape event row: the row becomes a one-element set and the set's checks hold.
 */
import { expect, test } from 'bun:test';
import { readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { connect } from '../src/db';
import { testServices, withDatabase } from './helpers/services';

const MIGRATIONS = resolve(import.meta.dir, '../sql/migrations');
const SETS = '0007_brand_subscribe_event_sets.sql';

test('0007 backfills an old-shape event into a one-element set and drops email_md5', async () => {
  const { adminUrl } = await testServices();
  const name = `test_mig_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const admin = connect(adminUrl, 1);
  await admin.unsafe(`create database ${name}`);
  const sql = connect(withDatabase(adminUrl, name), 1);
  try {
    const before = (await readdir(MIGRATIONS)).filter((f) => f.endsWith('.sql') && f < SETS).sort();
    for (const f of before) await sql.unsafe(await Bun.file(join(MIGRATIONS, f)).text());
    const account = crypto.randomUUID();
    const brand = crypto.randomUUID();
    const md5 = '0cc175b9-c0f1-b6a8-31c3-99e269772661';
    await sql`insert into brand_subscribe_events (account_id, email_md5, brand_id, source) values (${account}, ${md5}, ${brand}, 'api')`;

    await sql.unsafe(await Bun.file(join(MIGRATIONS, SETS)).text());

    const rows = await sql<{ brand: string; md5s: string[]; source: string }[]>`
      select brand_id::text as brand, email_md5s::text[] as md5s, source from brand_subscribe_events`;
    expect([...rows]).toEqual([{ brand, md5s: [md5], source: 'api' }]);
    const [old] = await sql`select 1 from information_schema.columns where table_name = 'brand_subscribe_events' and column_name = 'email_md5'`;
    expect(old).toBeUndefined();
    // Not null, and never an empty set.
    await expect(sql`insert into brand_subscribe_events (account_id, brand_id, source) values (${account}, ${brand}, 'api')`).rejects.toThrow();
    await expect(sql`insert into brand_subscribe_events (account_id, brand_id, email_md5s, source) values (${account}, ${brand}, '{}', 'api')`).rejects.toThrow();
  } finally {
    await sql.end({ timeout: 2 });
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
});

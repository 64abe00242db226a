/**
 * The migration runner on a database of its own: the whole set applies once, a second run applies
 * nothing, and a database migrated by another version (files this one does not have, or a file
 * that changed) is refused with a clear error instead of having tables created over its own.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { readdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { connect, type Sql } from '../src/db';
import { migrate, MigrationError } from '../src/migrate';
import { testServices, withDatabase } from './helpers/services';

const name = `test_mig_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`;
let adminUrl: string;
let sql: Sql;

beforeAll(async () => {
  adminUrl = (await testServices()).adminUrl;
  const admin = connect(adminUrl, 1);
  await admin.unsafe(`create database ${name}`).finally(() => admin.end());
  sql = connect(withDatabase(adminUrl, name), 2);
});

afterAll(async () => {
  await sql?.end({ timeout: 2 });
  const admin = connect(adminUrl, 1);
  await admin.unsafe(`drop database if exists ${name} with (force)`).finally(() => admin.end());
});

test('a fresh database gets every file once, in name order; a second run applies nothing', async () => {
  const files = (await readdir(resolve(import.meta.dir, '../sql/migrations'))).filter((f) => f.endsWith('.sql')).sort();
  expect(await migrate(sql)).toEqual(files);
  expect(await migrate(sql)).toEqual([]);
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from schema_migrations`;
  expect(row!.n).toBe(files.length);
});

test("the outbox's md5 sets use lz4 where the server has it, else the default (0009)", async () => {
  const [server] = await sql<{ lz4: boolean }[]>`
    select 'lz4' = any (enumvals) as lz4 from pg_settings where name = 'default_toast_compression'`;
  const [column] = await sql<{ method: string }[]>`
    select attcompression as method from pg_attribute
    where attrelid = 'brand_subscribe_events'::regclass and attname = 'email_md5s'`;
  expect(column!.method).toBe(server!.lz4 ? 'l' : '');
});

test("the write guard is one volatile frame without Citus's catalog lookup on one PostgreSQL (0010)", async () => {
  const [citus] = await sql`select 1 from pg_extension where extname = 'citus'`;
  const guards = await sql<{ name: string; volatility: string; source: string }[]>`
    select proname as name, provolatile as volatility, prosrc as source from pg_proc
    where proname in ('contact_write_lock', 'contact_write_ok') order by proname`;
  expect(guards.map((g) => g.name)).toEqual(['contact_write_lock', 'contact_write_ok']);
  for (const g of guards) {
    // On Citus the create's guard must be stable (pushed down whole) and the lock reads the shard.
    expect(g.volatility).toBe(citus && g.name === 'contact_write_ok' ? 's' : 'v');
    expect(g.source.includes('to_regclass')).toBe(Boolean(citus) && g.name === 'contact_write_lock');
    expect(g.source.includes('contact_write_lock(')).toBe(Boolean(citus) && g.name === 'contact_write_ok');
  }
});

test('a database migrated by another version of the service is refused, and nothing is applied', async () => {
  await sql`insert into schema_migrations (version, checksum) values ('0004_cache_invalidation.sql', 'x')`;
  try {
    const error = await migrate(sql).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toContain('0004_cache_invalidation.sql');
    expect((error as Error).message).toContain('fresh database');
  } finally {
    await sql`delete from schema_migrations where version = '0004_cache_invalidation.sql'`;
  }
});

test('a file that changed after it was applied is refused', async () => {
  await sql`update schema_migrations set checksum = 'changed' where version = '0001_schema.sql'`;
  await expect(migrate(sql)).rejects.toThrow('0001_schema.sql changed after it was applied');
});

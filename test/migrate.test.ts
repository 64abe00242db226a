/**
 * The migration runner on a database of its own: the whole set applies once, a second run applies
 * nothing, and a database migrated by another version (files this one does not have, or a file
 * that changed) is refused with a clear error instead of having tables created over its own.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { cp, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { connect, type Sql } from '../src/db';
import { migrate, MigrationError, textBeforeCommentEdits } from '../src/migrate';
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

/**
 * The checksums that databases migrated before the edits of EDITED_COMMENT_LINES (src/migrate.ts)
 * recorded for the files it lists: sha256 of each file as it was committed then.
 */
const RECORDED_BEFORE_COMMENT_EDITS: Record<string, string> = {
  '0008_contact_write_ok.sql': '495a876b051a86e4e5c6be39168455936a34a72914b5a4ab024329f23deee412',
  '0009_events_lz4.sql': 'c378d06bc1a0d81dc108ce8e533aaa1fefdafeef73675357f8e44c30b7403c21',
  '0010_write_guard_one_frame.sql': '8ee5ae1f3e9f9aa780636a78d8d1b1c63b7c7696eadc7aa9cad65ddebe3bf0e7',
  '0016_account_locks.sql': 'a57589a9e98c10b8b37aad1155663ccf3bc674f6c191e34c01c9ef9511f75d5b',
  '0017_account_node_fast_path.sql': '84bdd7f66e2e332ac68fa235e65b8d31374d744f0ae51ad3c5fa76cc016c366b',
  '0018_static_write_checks.sql': '443aa83b91179de04280390a7f0db1c917a8ef19a43293583251ae6c9b888e8d',
};

describe('comment lines edited after their file was applied', () => {
  const MIGRATIONS = resolve(import.meta.dir, '../sql/migrations');
  const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
  const comment = (line: string | undefined) => line !== undefined && line.trimStart().startsWith('--');

  test('put back, they give the text those databases recorded; only comment lines differ', async () => {
    for (const [file, recorded] of Object.entries(RECORDED_BEFORE_COMMENT_EDITS)) {
      const text = await Bun.file(join(MIGRATIONS, file)).text();
      const former = textBeforeCommentEdits(file, text);
      expect(former).toBeDefined();
      expect(sha256(former!)).toBe(recorded);
      const [now, then] = [text.split('\n'), former!.split('\n')];
      expect(then.length).toBe(now.length);
      const changed = now.flatMap((line, i) => (line === then[i] ? [] : [[line, then[i]]]));
      expect(changed.length).toBeGreaterThan(0);
      for (const [a, b] of changed) expect([comment(a), comment(b)]).toEqual([true, true]);
    }
  });

  test('a listed line that is not a comment refuses to migrate', async () => {
    const text = await Bun.file(join(MIGRATIONS, '0009_events_lz4.sql')).text();
    const lines = text.split('\n');
    lines[6] = 'select 1;';
    expect(() => textBeforeCommentEdits('0009_events_lz4.sql', lines.join('\n'))).toThrow(MigrationError);
  });

  test('the former texts migrated, nothing more applies; a changed statement is still refused', async () => {
    const before = `${name}_before`;
    const dirs = await mkdtemp(join(tmpdir(), 'migrations-'));
    const admin = connect(adminUrl, 1);
    await admin.unsafe(`create database ${before}`);
    const db = connect(withDatabase(adminUrl, before), 2);
    try {
      const [former, changed] = [join(dirs, 'former'), join(dirs, 'changed')];
      await cp(MIGRATIONS, former, { recursive: true });
      await cp(MIGRATIONS, changed, { recursive: true });
      for (const file of Object.keys(RECORDED_BEFORE_COMMENT_EDITS)) {
        const text = await Bun.file(join(MIGRATIONS, file)).text();
        await writeFile(join(former, file), textBeforeCommentEdits(file, text)!);
      }
      const all = (await readdir(MIGRATIONS)).filter((f) => f.endsWith('.sql')).sort();
      expect(await migrate(db, undefined, former)).toEqual(all);
      const recorded = await db<{ version: string; checksum: string }[]>`
        select version, checksum from schema_migrations
        where version in ${db(Object.keys(RECORDED_BEFORE_COMMENT_EDITS))} order by version`;
      expect(Object.fromEntries(recorded.map((r) => [r.version, r.checksum]))).toEqual(RECORDED_BEFORE_COMMENT_EDITS);

      expect(await migrate(db)).toEqual([]);

      const text = await Bun.file(join(MIGRATIONS, '0009_events_lz4.sql')).text();
      await writeFile(join(changed, '0009_events_lz4.sql'), `${text}\nselect 1;\n`);
      await expect(migrate(db, undefined, changed)).rejects.toThrow('0009_events_lz4.sql changed after it was applied');
    } finally {
      await db.end({ timeout: 2 });
      await admin.unsafe(`drop database if exists ${before} with (force)`).finally(() => admin.end());
      await rm(dirs, { recursive: true, force: true });
    }
  });
});

test('a file that changed after it was applied is refused', async () => {
  await sql`update schema_migrations set checksum = 'changed' where version = '0001_schema.sql'`;
  await expect(migrate(sql)).rejects.toThrow('0001_schema.sql changed after it was applied');
});

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
import { migrate, MigrationError, statementsOf } from '../src/migrate';
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
 * The migrations whose comments were edited after they were applied (COMMENTS_EDITED, src/migrate.ts),
 * as they were then: the landed main before the edits. Databases migrated from these texts recorded
 * their checksums.
 */
const FORMER_REVISION = 'a7f2337';
const EDITED = [
  '0003_contact_write_lock.sql',
  '0007_citus.sql',
  '0008_contact_write_ok.sql',
  '0009_events_lz4.sql',
  '0010_write_guard_one_frame.sql',
  '0011_event_feed.sql',
  '0013_contact_exports.sql',
  '0014_rate_limits.sql',
  '0016_account_locks.sql',
  '0017_account_node_fast_path.sql',
  '0018_static_write_checks.sql',
];

describe('comments edited after their file was applied', () => {
  const ROOT = resolve(import.meta.dir, '..');
  const MIGRATIONS = join(ROOT, 'sql/migrations');
  const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
  const formerText = (file: string) => {
    const git = Bun.spawnSync(['git', 'show', `${FORMER_REVISION}:sql/migrations/${file}`], { cwd: ROOT });
    if (git.exitCode !== 0) throw new Error(`git show ${FORMER_REVISION}: ${git.stderr.toString()}`);
    return git.stdout.toString();
  };

  test('only comment lines differ from the texts those databases applied', async () => {
    for (const file of EDITED) {
      const [now, then] = [await Bun.file(join(MIGRATIONS, file)).text(), formerText(file)];
      expect(now).not.toBe(then);
      expect(statementsOf(now)).toBe(statementsOf(then));
    }
    // Whole comment lines only: a statement's trailing comment is part of what runs.
    expect(statementsOf('-- a\nselect 1; -- b\n  -- c\nselect 2;')).toBe('select 1; -- b\nselect 2;');
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
      for (const file of EDITED) await writeFile(join(former, file), formerText(file));
      const all = (await readdir(MIGRATIONS)).filter((f) => f.endsWith('.sql')).sort();
      expect(await migrate(db, undefined, former)).toEqual(all);
      const recorded = await db<{ version: string; checksum: string }[]>`
        select version, checksum from schema_migrations where version in ${db(EDITED)} order by version`;
      expect(recorded.map((r) => r.checksum)).toEqual(EDITED.map((file) => sha256(formerText(file))));

      expect(await migrate(db)).toEqual([]);

      // A statement changed in an edited file: its former checksum is no longer accepted.
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

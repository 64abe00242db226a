// The pgloader step against a real PostgreSQL: both shapes' files A and B loaded and upserted by
// pgloader pass the step's verification, every staged row holds the cells our reader reads (quoted
// commas and quotes, padded emails, empty cells), and an end state that is off by one row or one
// cell fails the verification.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { chmod, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/db';
import { createBenchAccount } from '../lib/account';
import { databaseProbes } from '../lib/cpu';
import { RunFiles } from '../lib/files';
import { generateCsv, type FileMeta } from '../lib/generate';
import { pgloaderBinary } from '../lib/services';
import { SHAPES, type ShapeName } from '../lib/shapes';
import { STAGING_TABLE } from './dba';
import { isLoggerRaceCrash, loadFile, runPgloader, sampleRows, verifyLoad, type PgloaderContext } from './pgloader';

const ROWS = 3000;
const dir = join(tmpdir(), `bench-pgloader-${process.pid}`);
const silent = () => {};

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
  await rm(dir, { recursive: true, force: true });
});

const filesOf = async (shape: ShapeName) => {
  const name = (variant: number) => join(dir, SHAPES[shape].fileName(ROWS, variant));
  return {
    a: await generateCsv(name(0), ROWS, 0, silent, shape),
    b: await generateCsv(name(1), ROWS, 1, silent, shape),
  };
};

describe('the pgloader step', () => {
  test('loads and upserts files A and B of each shape, verified as the dba step', async () => {
    for (const shape of ['wide', 'narrow'] as const) {
      const files = await filesOf(shape);
      const infra = { sql: db.sql, databaseUrl: db.url, logDir: dir };
      const run = await runPgloader(infra, 'test', files, new RunFiles('all', [], silent), silent);
      expect(run.shape).toBe(shape);
      expect(run.a.upserted).toBe(files.a.normal);
      expect(run.b?.upserted).toBe(files.b.normal);
      expect(run.a.seconds).toBeGreaterThan(0);
      expect(Object.keys(run.a.cpu ?? {})).toEqual(['postgres', 'pgloader']);
      // Without a database of its own the step deletes its contacts after.
      const [left] = await db.sql`select count(*)::int as n from contacts where account_id = ${run.accountId}`;
      expect(left!.n).toBe(0);
    }
  });

  test("every staged row holds our reader's cells, and a state off by a row or a cell fails the checks", async () => {
    const { a } = await filesOf('wide');
    const account = await createBenchAccount(db.sql, 'pgloader checks', SHAPES.wide);
    const ctx: PgloaderContext = {
      sql: db.sql,
      url: db.url,
      bin: await pgloaderBinary(silent),
      dir,
      runFiles: new RunFiles('all', [], silent),
      probes: await databaseProbes(db.url),
      log: silent,
    };
    const [{ since } = { since: '' }] = await db.sql<{ since: string }[]>`select clock_timestamp()::text as since`;
    await loadFile(ctx, account.id, a, 'A');
    const every = sampleRows(ROWS, ROWS);
    const verify = (file: FileMeta = a) => verifyLoad(db.sql, account.id, file, since, every);
    expect(await verify()).toBe(a.normal);

    // A quoted cell with a comma read as two: the row's city is wrong.
    const [quoted] = await db.sql.unsafe<{ row_no: number }[]>(
      `select row_no::int as row_no from ${STAGING_TABLE} where city = 'Paris, FR' limit 1`,
    );
    await db.sql.unsafe(`update ${STAGING_TABLE} set city = 'Paris' where row_no = $1`, [quoted!.row_no]);
    await expect(verify()).rejects.toThrow(/city as "Paris", the file holds "Paris, FR"/);
    await db.sql.unsafe(`update ${STAGING_TABLE} set city = 'Paris, FR' where row_no = $1`, [quoted!.row_no]);
    // A padded email trimmed, as pgloader's reader does by default.
    const [padded] = await db.sql.unsafe<{ row_no: number; email: string }[]>(
      `select row_no::int as row_no, email from ${STAGING_TABLE} where email like ' %' limit 1`,
    );
    await db.sql.unsafe(`update ${STAGING_TABLE} set email = btrim(email) where row_no = $1`, [padded!.row_no]);
    await expect(verify()).rejects.toThrow(/Email as/);
    await db.sql.unsafe(`update ${STAGING_TABLE} set email = $1 where row_no = $2`, [padded!.email, padded!.row_no]);
    // A line lost.
    const [last] = await db.sql.unsafe(`delete from ${STAGING_TABLE} where row_no = ${ROWS} returning *`);
    await expect(verify()).rejects.toThrow(`pgloader staged ${ROWS - 1} rows`);
    const columns = SHAPES.wide.columns.map((c) => c.toLowerCase());
    await db.sql.unsafe(
      `insert into ${STAGING_TABLE} (row_no, ${columns.join(', ')}) overriding system value
       values (${ROWS}, ${columns.map((_, k) => `$${k + 1}`).join(', ')})`,
      columns.map((c) => last![c] as string),
    );
    expect(await verify()).toBe(a.normal);

    // A contact the upsert did not write; then one more than the file's, written before the load.
    const [one] = await db.sql<{ email_md5: string }[]>`
      update contacts set updated_at = ${since}::timestamptz - interval '1 second'
      where account_id = ${account.id}
        and email_md5 = (select email_md5 from contacts where account_id = ${account.id} limit 1)
      returning email_md5`;
    await expect(verify()).rejects.toThrow(`the upsert wrote ${a.normal - 1} contacts`);
    await db.sql`
      update contacts set updated_at = now() where account_id = ${account.id} and email_md5 = ${one!.email_md5}`;
    await db.sql`
      insert into contacts (account_id, email_md5, email, first_source, updated_at)
      values (${account.id}, md5('extra@example.com')::uuid, 'extra@example.com', 'import',
              ${since}::timestamptz - interval '1 second')`;
    await expect(verify()).rejects.toThrow(`the account holds ${a.normal + 1} contacts`);
  });

  test('a start that crashes as dimitri/pgloader#1380 does is run again; no other failure is', async () => {
    const { a } = await filesOf('narrow');
    const real = await pgloaderBinary(silent);
    const crash =
      "printf 'KABOOM!\\nINVALID-ARRAY-INDEX-ERROR: Invalid index 1 for (SIMPLE-ARRAY (UNSIGNED-BYTE 32)\\n'" +
      "'  (1)), should be a non-negative integer below 1.\\n'; exit 1";
    // A pgloader that fails its first `fails` starts with `failure`, then (or after `then`) is the real one.
    const wrapped = async (name: string, fails: number, failure: string, then = 'exec') => {
      const counter = join(dir, `${name}.starts`);
      const bin = join(dir, `${name}.sh`);
      await Bun.write(
        bin,
        `#!/bin/sh\nn=$(cat '${counter}' 2>/dev/null || echo 0); echo $((n + 1)) > '${counter}'\n` +
          `if [ "$n" -lt ${fails} ]; then ${failure}; fi\n` +
          (then === 'exec' ? `exec '${real}' "$@"\n` : `'${real}' "$@"; ${then}\n`),
      );
      await chmod(bin, 0o755);
      const starts = async () => Number((await Bun.file(counter).text()).trim());
      const account = await createBenchAccount(db.sql, `pgloader ${name}`, SHAPES.narrow);
      const ctx: PgloaderContext = {
        sql: db.sql,
        url: db.url,
        bin,
        dir,
        runFiles: new RunFiles('all', [], silent),
        probes: [],
        log: silent,
      };
      return { load: () => loadFile(ctx, account.id, a, 'A'), starts, account };
    };

    // Crashed once, started again: the load is whole, and the run says it crashed.
    const once = await wrapped('crash-once', 1, crash);
    const run = await once.load();
    expect(run.crashes).toBe(1);
    expect(run.upserted).toBe(a.normal);
    expect(await once.starts()).toBe(2);

    // Crashing at every start: three starts, then the crash's own words.
    const always = await wrapped('crash-always', 9, crash);
    await expect(always.load()).rejects.toThrow(/exited with 1:\s+KABOOM!\s+INVALID-ARRAY-INDEX-ERROR/);
    expect(await always.starts()).toBe(3);

    // Another failure is not run again.
    const other = await wrapped('other', 9, `echo 'KABOOM! DB-CONNECTION-ERROR: Failed to connect'; exit 1`);
    await expect(other.load()).rejects.toThrow(/DB-CONNECTION-ERROR/);
    expect(await other.starts()).toBe(1);

    // The same crash after the upsert committed is not run again either: the account has changed.
    const late = await wrapped('crash-late', 0, crash, crash);
    await expect(late.load()).rejects.toThrow(/INVALID-ARRAY-INDEX-ERROR/);
    expect(await late.starts()).toBe(1);
    const [{ n } = { n: -1 }] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from contacts where account_id = ${late.account.id}`;
    expect(n).toBe(a.normal);
  });

  test('isLoggerRaceCrash knows the crash of dimitri/pgloader#1380 and nothing else', () => {
    const race =
      'KABOOM!\nINVALID-ARRAY-INDEX-ERROR: Invalid index 1 for (SIMPLE-ARRAY (UNSIGNED-BYTE 32)\n   (1)), should be';
    expect(isLoggerRaceCrash(race)).toBe(true);
    expect(isLoggerRaceCrash(race.replace('KABOOM!', ''))).toBe(false);
    expect(isLoggerRaceCrash(race.replace('32', '8'))).toBe(false);
    expect(isLoggerRaceCrash('KABOOM!\nDB-CONNECTION-ERROR: Failed to connect to pgsql')).toBe(false);
  });
});

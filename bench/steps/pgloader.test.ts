// The pgloader step against a real PostgreSQL: both shapes' files A and B loaded and upserted by
// pgloader pass the step's verification, every staged row holds the cells our reader reads (quoted
// commas and quotes, padded emails, empty cells), and an end state that is off by one row or one
// cell fails the verification.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { rm } from 'node:fs/promises';
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
import { loadFile, runPgloader, sampleRows, verifyLoad, type PgloaderContext } from './pgloader';

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
});

/** The admin `import` command: a manual contact import of a local CSV file, run in-process. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdminError, UsageError } from '../../src/cli/admin/args';
import { cancelCommand, importCommand, type ImportFlags } from '../../src/cli/admin/import';
import { connect } from '../../src/db';
import { importBed } from '../helpers/import-bed';
import { importRow, testConfig } from '../helpers/file-store';
import { createAccount, createAttribute, createBrand } from '../helpers/fixtures';

const bed = importBed();
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'admin-import-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function file(content: string | Uint8Array): Promise<string> {
  const path = join(dir, `${crypto.randomUUID()}.csv`);
  await writeFile(path, content);
  return path;
}

const run = (flags: ImportFlags) => importCommand(bed.db.sql, testConfig(2), flags, bed.files.store);

async function account() {
  const id = await createAccount(bed.db.sql);
  await createAttribute(bed.db.sql, id, 'firstName', 'string');
  return { id, brand: await createBrand(bed.db.sql, id, 'Alpha') };
}

describe('admin import', () => {
  test('imports a local file with columns from its header (any case), as a manual import', async () => {
    const a = await account();
    const path = await file('\uFEFF EMAIL ,FirstName,brand\r\na@example.com,Ann,alpha\r\nb@example.com,Bo,\r\n');
    // The admin CLI's pool has two connections; the pipeline must make do with them.
    const cliSql = connect(bed.db.url, 2);
    const { id } = await importCommand(
      cliSql,
      testConfig(2),
      { account: a.id, file: path, strategy: 'keep', brand: [a.brand], 'no-events': true },
      bed.files.store,
    ).finally(() => cliSql.end());
    expect(await importRow(bed.db.sql, a.id, id)).toMatchObject({ status: 'success', rowCount: 2, addedCount: 2 });
    const [imp] = await bed.db
      .sql`select method, columns, publish_events, duplicate_contact_strategy from contact_imports where id = ${id}`;
    expect(imp).toEqual({
      method: 'manual',
      columns: ['Email', 'firstName', 'Brand'],
      publish_events: false,
      duplicate_contact_strategy: 'keep',
    });
    const contacts = await bed.db
      .sql`select email, attributes, first_import_method from contacts where account_id = ${a.id} order by email`;
    expect([...contacts]).toEqual([
      { email: 'a@example.com', attributes: { firstName: 'Ann' }, first_import_method: 'manual' },
      { email: 'b@example.com', attributes: { firstName: 'Bo' }, first_import_method: 'manual' },
    ]);
  });

  test('a header that is not the schema, an empty file, an unknown brand: a clear error, no import', async () => {
    const a = await account();
    expect(
      await run({ account: a.id, file: await file('Email,nope\n'), strategy: 'skip' }).catch((e) => e),
    ).toBeInstanceOf(AdminError);
    expect(
      await run({ account: a.id, file: await file('firstName\n'), strategy: 'skip' }).catch((e) => e.message),
    ).toContain('Email');
    expect(await run({ account: a.id, file: await file(''), strategy: 'skip' }).catch((e) => e.message)).toContain(
      'empty',
    );
    expect(
      await run({ account: a.id, file: await file('Email\n'), strategy: 'skip', brand: [crypto.randomUUID()] }).catch(
        (e) => e.message,
      ),
    ).toContain('no brand');
    expect(
      await run({ account: a.id, file: join(dir, 'missing.csv'), strategy: 'skip' }).catch((e) => e.message),
    ).toContain('cannot read');
    const [n] = await bed.db.sql<
      { n: number }[]
    >`select count(*)::int as n from contact_imports where account_id = ${a.id}`;
    expect(n!.n).toBe(0);
  });

  test('bad flags are usage errors', async () => {
    const a = await account();
    const path = await file('Email\n');
    expect(await run({ file: path, strategy: 'skip' }).catch((e) => e)).toBeInstanceOf(UsageError);
    expect(await run({ account: a.id, file: path, strategy: 'merge' }).catch((e) => e)).toBeInstanceOf(UsageError);
    expect(await run({ account: 'nope', file: path, strategy: 'skip' }).catch((e) => e)).toBeInstanceOf(UsageError);
  });

  test('another open import of the account is refused', async () => {
    const a = await account();
    await bed.db.sql`
      insert into contact_imports (account_id, status, method, columns, duplicate_contact_strategy)
      values (${a.id}, 'awaiting-upload', 'api', ${bed.db.sql.array(['Email'])}, 'skip')`;
    expect(
      await run({ account: a.id, file: await file('Email\nx@example.com\n'), strategy: 'skip' }).catch(
        (e) => e.message,
      ),
    ).toContain('another import is open');
  });

  test('a file the pipeline refuses fails the import and says why', async () => {
    const a = await account();
    const error = await run({
      account: a.id,
      file: await file(Buffer.from([0x45, 0x6d, 0x61, 0x69, 0x6c, 0x0a, 0xff, 0x0a])),
      strategy: 'skip',
    }).catch((e) => e);
    expect(error).toBeInstanceOf(AdminError);
    expect(error.message).toMatch(/^import [0-9a-f-]{36} failed: The file is not UTF-8 text\.$/);
    const [imp] = await bed.db.sql`select status from contact_imports where account_id = ${a.id}`;
    expect(imp!.status).toBe('failed');
  });

  test('prints the finished import, with rejectedRowsUrl when rows were rejected (beyond the contract)', async () => {
    const a = await account();
    const clean = await run({ account: a.id, file: await file('Email\na@example.com\n'), strategy: 'skip' });
    expect(clean).toMatchObject({ status: 'success', rowCount: 1, addedCount: 1, malformedCount: 0 });
    expect(clean).not.toHaveProperty('rejectedRowsUrl');
    const rejected = await run({
      account: a.id,
      file: await file('Email\nb@example.com\nnot-an-email\nb@example.com\n'),
      strategy: 'skip',
    });
    expect(rejected).toMatchObject({ status: 'success', addedCount: 1, malformedCount: 1, duplicateInFileCount: 1 });
    expect((rejected as { rejectedRowsUrl?: string }).rejectedRowsUrl).toBe(
      `${testConfig(2).publicUrl}/v1/contact-imports/${rejected.id}/rejected-rows`,
    );
  });
});

describe('admin import cancel (an extension beyond the contract)', () => {
  const cancel = (account: string, id: string) =>
    cancelCommand(bed.db.sql, testConfig(2), { account, import: id }, bed.files.store);

  async function openImport(accountId: string, status: 'awaiting-upload' | 'uploaded' | 'importing' | 'success') {
    const [row] = await bed.db.sql<{ id: string }[]>`
      insert into contact_imports (account_id, status, method, columns, duplicate_contact_strategy)
      values (${accountId}, ${status}, 'api', ${bed.db.sql.array(['Email'])}, 'skip') returning id::text as id`;
    return row!.id;
  }

  test('an import awaiting its upload is cancelled, again without change, and the account is free', async () => {
    const a = await account();
    const id = await openImport(a.id, 'awaiting-upload');
    const first = await cancel(a.id, id);
    expect(first).toMatchObject({ id, status: 'failed', failureReason: 'The import was cancelled.' });
    expect(await cancel(a.id, id)).toEqual(first);
    const next = await run({ account: a.id, file: await file('Email\nc@example.com\n'), strategy: 'skip' });
    expect(next).toMatchObject({ status: 'success', addedCount: 1 });
  });

  test('an import that is importing or final is refused with the reason; unknown ids and accounts too', async () => {
    const a = await account();
    const importing = await openImport(a.id, 'importing');
    expect(await cancel(a.id, importing).catch((e) => e)).toBeInstanceOf(AdminError);
    expect((await cancel(a.id, importing).catch((e) => e)).message).toMatch(/importing/i);
    const [row] = await bed.db.sql`select status from contact_imports where id = ${importing}`;
    expect(row!.status).toBe('importing');
    const b = await account();
    const done = await openImport(b.id, 'success');
    expect((await cancel(b.id, done).catch((e) => e)).message).toMatch(/succeeded|success/i);
    const missing = await cancel(b.id, importing).catch((e) => e);
    expect(missing).toBeInstanceOf(AdminError);
    expect(missing.message).toBe(`No contact import ${importing} in this account.`);
    expect(await cancel(crypto.randomUUID(), done).catch((e) => e)).toBeInstanceOf(AdminError);
    expect(cancelCommand(bed.db.sql, testConfig(2), { account: a.id, import: 'nope' })).rejects.toThrow(UsageError);
  });
});

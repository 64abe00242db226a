// The rejected-rows report, an extension beyond the contract: GET /v1/contact-imports/{id}/rejected-rows
// streams a CSV of every data row that was not added or updated, with its reason, the column at
// fault, a detail and the row's cells as the file had them. Through the real flow: POST
// /v1/contact-imports, PUT to uploadUrl, the job run with runImport (batches of 3 rows, so the
// skipped rows come from several merge batches), GET of the import and of its report.
import { beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { gzipSync } from 'node:zlib';
import Papa from 'papaparse';
import { loadConfig, type Config } from '../../src/config';
import { REASONS, type Reason } from '../../src/imports/rejections';
import { LocalStore, rejectedRowsObjectKey } from '../../src/storage';
import { runImport, UnrecoverableImportError } from '../../worker/import';
import { PACED_PAGES } from '../../worker/import/rejects';
import { onCluster } from '../../worker/import/staging';
import { stagingFor } from '../../worker/import/staging-pool';
import { ReportDraft } from '../../worker/import/report';
import { loadImport } from '../../worker/import/state';
import { sweep } from '../../worker/sweep';
import { expectProblem, type TestApp } from '../helpers/app';
import { stagingOf } from '../helpers/staging';
import { uploadBed } from '../helpers/upload-bed';
import { createAccount, createAttribute, createBrand, createKey } from '../helpers/fixtures';
import { testServices } from '../helpers/services';

const HEADER = 'Email,Brand,firstName,age,vip,alt,tags';
const COLUMNS = HEADER.split(',');
const md5 = (s: string) => createHash('md5').update(s.toLowerCase()).digest('hex');

const bed = uploadBed('imports-rejected');
let t: TestApp;
let dir: string;
let store: LocalStore;
let put: (req: Request) => Promise<Response>;
beforeAll(() => {
  ({ t, dir, store, put } = bed);
});

interface Account {
  id: string;
  key: string;
}

/**
 * A fresh account with the file's attributes, the brand "Alpha", and what the skip reasons need:
 * an enabled contact, a disabled one, and a seed address.
 */
async function account(): Promise<Account> {
  const id = await createAccount(t.db.sql);
  await createAttribute(t.db.sql, id, 'firstName', 'string');
  await createAttribute(t.db.sql, id, 'age', 'number');
  await createAttribute(t.db.sql, id, 'vip', 'boolean');
  await createAttribute(t.db.sql, id, 'alt', 'email');
  await createAttribute(t.db.sql, id, 'tags', 'array');
  await createBrand(t.db.sql, id, 'Alpha');
  const contact = (email: string, attributes: object, enabled: boolean) => t.db.sql`
    insert into contacts (account_id, email_md5, email, attributes, enabled, first_source)
    values (${id}, ${md5(email)}::uuid, ${email}, ${t.db.sql.json(attributes as never)}, ${enabled}, 'api')`;
  await contact('keep@example.com', { firstName: 'Kept' }, true);
  await contact('dis@example.com', { firstName: 'Off' }, false);
  await t.db.sql`
    insert into seed_addresses (account_id, email_md5, email)
    values (${id}, ${md5('seed@example.com')}::uuid, 'seed@example.com')`;
  // A seed inserted by hand moves the account's seeds counter (sql/migrations/0018).
  await t.db.sql`select seeds_changed(${id}::uuid)`;
  return { id, key: await createKey(t.db.sql, id) };
}

/** Each data row of the file with the report line it must get (none: added or updated). */
const ROWS: [string, Reason | undefined, string?][] = [
  ['new1@example.com,Alpha,Ann,30,yes,a@example.com,x;y', undefined],
  ['bad-email,,Bob,1,no,,', 'invalid_email', 'Email'],
  [' ,,NoEmail,1,no,,', 'missing_email', 'Email'],
  [`long@example.com,,${'L'.repeat(256)},1,no,,`, 'value_too_long', 'firstName'],
  ['age@example.com,,Al,abc,no,,', 'wrong_type', 'age'],
  ['vip@example.com,,Vi,1,maybe,,', 'wrong_type', 'vip'],
  ['alt@example.com,,Al,1,no,not-an-address,', 'wrong_type', 'alt'],
  ['brand@example.com,Nope,Br,1,no,,', 'unknown_brand', 'Brand'],
  ['short@example.com,Alpha,Sh', 'wrong_field_count', ''],
  ['nul@example.com,,Nu\u0000l,1,no,,', 'nul_character', 'firstName'],
  ['dup@example.com,,First,1,no,,', 'duplicate_in_file', ''],
  ['dup@example.com,,Second,2,no,,', 'duplicate_in_file', ''],
  [' DUP@example.com ,,Third,3,no,,', undefined],
  ['seed@example.com,,Seed,1,no,,', 'seed_address', ''],
  ['dis@example.com,,Again,1,no,,', 'disabled_contact', ''],
  ['keep@example.com,,Kept,,,,', 'unchanged', ''],
  ['"in valid@example.com",,T,1,no,,', 'invalid_email', 'Email'],
  ['tags@example.com,,T,1,no,,' + 'a'.repeat(256), 'value_too_long', 'tags'],
  ['new2@example.com,,"Quoted, with comma",2,true,,', undefined],
  // Last: a broken quote runs on to the next quote of the file (here, its end), as papaparse reads it.
  ['"quote@example.com"x,,Q,1,no,,', 'bad_quote', ''],
];

function file(rows: string[], eol = '\n'): string {
  return [HEADER, ...rows].join(eol) + eol;
}

/** Creates an import, PUTs `body` to its upload link and runs its job; returns its id and the run's log. */
async function importFile(
  a: Account,
  body: string | Uint8Array,
  opts: { strategy?: string; restoreDisabled?: boolean; config?: Partial<Config> } = {},
): Promise<{ id: string; logs: { msg: string; fields?: any }[] }> {
  const res = await t.call('POST', '/v1/contact-imports', {
    key: a.key,
    body: {
      columns: COLUMNS,
      duplicateContactStrategy: opts.strategy ?? 'keep',
      restoreDisabled: opts.restoreDisabled,
    },
  });
  expect(res.status).toBe(201);
  const up = await put(new Request(res.body.uploadUrl, { method: 'PUT', body }));
  expect(up.status).toBe(200);
  const logs: { msg: string; fields?: any }[] = [];
  const config = { ...loadConfig({ IMPORT_BATCH_SIZE: '3', DATA_DIR: dir, STORAGE_DRIVER: 'local' }), ...opts.config };
  await runImport(
    { sql: t.db.sql, storage: store, config, log: (msg, fields) => logs.push({ msg, fields }) },
    a.id,
    res.body.id,
  ).catch((e) => {
    if (!(e instanceof UnrecoverableImportError)) throw e;
  });
  return { id: res.body.id, logs };
}

/**
 * An overwrite import of `rows`, created and uploaded but not run: its id, and the dependencies of
 * runImport with batches of `batchSize` rows and a log kept in `logs`.
 */
async function uploaded(a: Account, rows: string[], batchSize: string) {
  const created = await t.call('POST', '/v1/contact-imports', {
    key: a.key,
    body: { columns: COLUMNS, duplicateContactStrategy: 'overwrite' },
  });
  expect((await put(new Request(created.body.uploadUrl, { method: 'PUT', body: file(rows) }))).status).toBe(200);
  const logs: { msg: string; fields?: any }[] = [];
  const config = loadConfig({ IMPORT_BATCH_SIZE: batchSize, DATA_DIR: dir, STORAGE_DRIVER: 'local' });
  const deps = {
    sql: t.db.sql,
    storage: store,
    config,
    log: (msg: string, fields?: object) => logs.push({ msg, fields }),
  };
  return { id: created.body.id as string, logs, deps };
}

async function getImport(a: Account, id: string) {
  const res = await t.call('GET', `/v1/contact-imports/${id}`, { key: a.key });
  expect(res.status).toBe(200);
  return res.body;
}

/** The report as served, parsed. */
async function report(a: Account, id: string): Promise<{ header: string[]; lines: string[][]; res: Response }> {
  const res = await t.app.handle(
    new Request(`http://localhost/v1/contact-imports/${id}/rejected-rows`, {
      headers: { authorization: `Bearer ${a.key}` },
    }),
  );
  expect(res.status).toBe(200);
  const text = await res.clone().text();
  const parsed = Papa.parse<string[]>(text, { delimiter: ',', skipEmptyLines: true });
  expect(parsed.errors).toEqual([]);
  const [header, ...lines] = parsed.data;
  return { header: header!, lines, res };
}

/** What each report line must say: row, reason, column, and the row's cells as the file had them. */
function expected(rows: typeof ROWS) {
  return rows.flatMap(([line, reason, column], i) => {
    if (!reason) return [];
    // A row with a broken quote is no CSV: its line is one field of the report.
    const cells = reason === 'bad_quote' ? [line] : Papa.parse<string[]>(line, { delimiter: ',' }).data[0]!;
    return [{ row: String(i + 1), reason, column: column ?? '', cells }];
  });
}

/** The import's counters per reason group, from its report. */
function countsOf(lines: string[][]) {
  const n = { malformed: 0, duplicateInFile: 0, skipped: 0 };
  for (const l of lines) n[REASONS[l[1] as Reason].counter]++;
  return n;
}

describe('the report of an import with every reason', () => {
  let a: Account;
  let id: string;
  let logs: { msg: string; fields?: any }[];
  beforeAll(async () => {
    a = await account();
    ({ id, logs } = await importFile(a, file(ROWS.map((r) => r[0]))));
  });

  test('each rejected row is a line, in file order: reason, column, the cells as the file had them', async () => {
    const { header, lines, res } = await report(a, id);
    expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(res.headers.get('content-disposition')).toBe(
      `attachment; filename="contact-import-${id}-rejected-rows.csv"`,
    );
    expect(header).toEqual(['row', 'reason', 'column', 'detail', ...COLUMNS]);
    const want = expected(ROWS);
    expect(lines.map((l) => [l[0], l[1], l[2]])).toEqual(want.map((w) => [w.row, w.reason, w.column]));
    expect(lines.map((l) => l.slice(4))).toEqual(want.map((w) => w.cells));
    // Every reason of the spec's list is in this one file but existing_contact (strategy skip, below).
    const reasons = new Set(lines.map((l) => l[1]));
    for (const r of Object.keys(REASONS)) if (r !== 'existing_contact') expect(reasons).toContain(r);
    // The fast walk read it: one line per row. The merge rejected rows of its own (seed, disabled,
    // unchanged): the draft written during the merge is the report only when it came late enough to
    // hold them (on one PostgreSQL it comes before this small merge ends, on a Citus cluster after),
    // else the finish writes it; either way every line above is there.
    const written = logs.find((l) => l.msg === 'import rejected-rows report written')?.fields;
    expect(written).toMatchObject({ lines: want.length, read: 'lines' });
    expect(typeof written.drafted).toBe('boolean');
  });

  test('details say what is wrong; a duplicate names the row that was imported instead', async () => {
    const { lines } = await report(a, id);
    const detail = (row: number) => lines.find((l) => l[0] === String(row))![3];
    expect(detail(5)).toBe('The age value is not a number.');
    expect(detail(6)).toBe('The vip value is not a boolean (true, false, yes, no, 1 or 0).');
    expect(detail(9)).toBe('The row has 3 fields; the header has 7.');
    expect(detail(10)).toBe('The firstName value contains a NUL character.');
    expect(detail(11)).toStartWith('Row 13 has the same email address');
    expect(detail(12)).toStartWith('Row 13 has the same email address');
    expect(detail(4)).toBe('The firstName value is longer than 255 characters.');
  });

  test("the lines per reason add up to the import's counts, and the import links its report", async () => {
    const { lines } = await report(a, id);
    const body = await getImport(a, id);
    expect(body).toMatchObject({ status: 'success', addedCount: 3, updatedCount: 0 });
    expect(countsOf(lines)).toEqual({
      malformed: body.malformedCount,
      duplicateInFile: body.duplicateInFileCount,
      skipped: body.skippedCount,
    });
    expect([body.malformedCount, body.duplicateInFileCount, body.skippedCount]).toEqual([12, 2, 3]);
    expect(body.rejectedRowsUrl).toBe(`http://api.test/v1/contact-imports/${id}/rejected-rows`);
    const list = await t.call('GET', '/v1/contact-imports', { key: a.key });
    expect(list.body.data.find((i: any) => i.id === id).rejectedRowsUrl).toBe(body.rejectedRowsUrl);
  });

  test('the rejected rows are kept only until the report is written; the report beside the import', async () => {
    const hex = id.replaceAll('-', '');
    const [left] = await t.db.sql`select to_regclass(${`import_rejects_${hex}`}) as t`;
    expect(left!.t).toBeNull();
    expect(await store.head(rejectedRowsObjectKey(a.id, id))).toBeDefined();
  });
});

describe('the file read again through the parser, and other files', () => {
  test('a quoted line break in a row: the same report, each row found by parsing the file', async () => {
    const a = await account();
    const rows = ROWS.map((r) => r[0]);
    rows[0] = 'new1@example.com,Alpha,"Ann\nSecond line",30,yes,,';
    rows.splice(3, 0, '', '   '); // blank lines are no rows
    const { id, logs } = await importFile(a, file(rows, '\r\n'));
    const { lines } = await report(a, id);
    const want = expected(ROWS);
    expect(lines.map((l) => [l[0], l[1], l[2]])).toEqual(want.map((w) => [w.row, w.reason, w.column]));
    // Parsed, the broken quote's row is the one cell papaparse made of the rest of the file.
    expect(lines.slice(0, -1).map((l) => l.slice(4))).toEqual(want.slice(0, -1).map((w) => w.cells));
    expect(lines.at(-1)!.slice(4)).toEqual(['quote@example.com"x,,Q,1,no,,\r\n']);
    expect(logs.find((l) => l.msg === 'import rejected-rows report written')?.fields.read).toBe('parsed');
  });

  test('rows rejected only before the merge: the report written during the merge is the one stored', async () => {
    const a = await account();
    // The read's and dedupe's reasons only: overwrite, no seed, no disabled or unchanged contact.
    const rows = ROWS.filter(([, reason]) => !['seed_address', 'disabled_contact', 'unchanged'].includes(reason!));
    const { id, logs } = await importFile(a, file(rows.map((r) => r[0])), { strategy: 'overwrite' });
    const { lines } = await report(a, id);
    const want = expected(rows);
    expect(lines.map((l) => [l[0], l[1], l[2]])).toEqual(want.map((w) => [w.row, w.reason, w.column]));
    expect(lines.map((l) => l.slice(4))).toEqual(want.map((w) => w.cells));
    const body = await getImport(a, id);
    expect(countsOf(lines)).toEqual({ malformed: 12, duplicateInFile: 2, skipped: 0 });
    expect(body).toMatchObject({ status: 'success', malformedCount: 12, duplicateInFileCount: 2, skippedCount: 0 });
    expect(logs.find((l) => l.msg === 'import rejected-rows report written')?.fields).toMatchObject({
      lines: want.length,
      drafted: true,
    });
  });

  test('a discarded draft (a run gives way) stops and leaves no file; the run that ends it reports', async () => {
    const a = await account();
    const rows = Array.from({ length: 20_000 }, (_, i) =>
      i % 1000 === 999 ? `bad-${i},,B,1,no,,` : `row${i}@example.com,,R,${i % 90},yes,,x`,
    );
    const { id, logs, deps } = await uploaded(a, rows, '1000');
    // A run that gives way after its first merged batch: the import stays in its merge.
    const merged = () => logs.some((l) => l.msg === 'import merge batch');
    expect(await runImport({ ...deps, giveWay: merged }, a.id, id)).toBe('yielded');
    expect(logs.some((l) => l.msg.includes('draft failed'))).toBe(false);

    // A draft of that merge, discarded at once, as a run that gives way discards its own.
    const conn = await t.db.sql.reserve();
    try {
      const job = (await loadImport(t.db.sql, a.id, id))!;
      const draft = new ReportDraft({
        sql: t.db.sql,
        conn,
        store,
        job,
        staging: await stagingFor(t.db.sql, job),
        batchSize: 1000,
        pace: 0,
        mergeConcurrency: 2,
        report: true,
        reportRetentionDays: 30,
        log: deps.log,
      });
      await draft.discard();
    } finally {
      conn.release();
    }
    expect(logs.map((l) => l.msg)).toContain('import rejected-rows report draft stopped');
    expect([...new Bun.Glob(`rejected-rows-${id}-*`).scanSync(tmpdir())]).toEqual([]);

    expect(await runImport(deps, a.id, id)).toBe('ended');
    const { lines } = await report(a, id);
    expect(lines.map((l) => [l[0], l[1]])).toEqual(
      Array.from({ length: 20 }, (_, k) => [String(1000 * (k + 1)), 'invalid_email']),
    );
    expect(logs.filter((l) => l.msg === 'import rejected-rows report written').at(-1)?.fields).toMatchObject({
      lines: 20,
      drafted: true,
    });
  });

  test('CRLF, a BOM and blank lines: the fast walk numbers rows as the read did', async () => {
    const a = await account();
    const rows = ROWS.map((r) => r[0]);
    // Blank in every way a line can start: ASCII and Unicode whitespace (what trim removes), quotes.
    rows.splice(5, 0, '', '  ', '""', '\t', '\u00a0', '\u3000 ', '\u2003', '\uFEFF');
    const { id, logs } = await importFile(a, `\uFEFF${file(rows, '\r\n')}`);
    const { header, lines } = await report(a, id);
    expect(header).toEqual(['row', 'reason', 'column', 'detail', ...COLUMNS]);
    const want = expected(ROWS);
    expect(lines.map((l) => [l[0], l[1], l[2]])).toEqual(want.map((w) => [w.row, w.reason, w.column]));
    expect(lines.map((l) => l.slice(4))).toEqual(want.map((w) => w.cells));
    expect(logs.find((l) => l.msg === 'import rejected-rows report written')?.fields.read).toBe('lines');
  });

  test('blank lines of every kind among rows the report does not want: numbered as the read did', async () => {
    const a = await account();
    // Lines the walk skips without decoding sit between blank ones it must decode: a blank line
    // counted as a row would shift every row number after it.
    const blanks = ['', '  ', '""', '\t', '\u00a0', '\u3000 ', '\u2003', '\u205f', '\uFEFF', '\u1680'];
    const rows: string[] = [];
    const bad: number[] = [];
    let row = 0;
    for (const [k, blank] of blanks.entries()) {
      rows.push(`ok${k}@example.com,,N,1,yes,,`, blank, `ok${k}b@example.com,,N,1,yes,,`);
      row += 2;
      rows.push(`bad-email-${k},,N,1,yes,,`);
      bad.push(++row);
    }
    const { id, logs } = await importFile(a, file(rows, '\r\n'));
    const { lines } = await report(a, id);
    expect(lines.map((l) => [Number(l[0]), l[1], l[4]])).toEqual(
      bad.map((n, k) => [n, 'invalid_email', `bad-email-${k}`]),
    );
    expect(logs.find((l) => l.msg === 'import rejected-rows report written')?.fields.read).toBe('lines');
  });

  test('a gzip upload: the report quotes the uncompressed rows', async () => {
    const a = await account();
    const { id } = await importFile(a, gzipSync(file(ROWS.map((r) => r[0]))));
    const { lines } = await report(a, id);
    expect(lines.map((l) => l.slice(4))).toEqual(expected(ROWS).map((w) => w.cells));
  });

  test('strategy skip: an enabled contact is existing_contact; restoreDisabled re-enables instead', async () => {
    const a = await account();
    const rows = ['keep@example.com,,Changed,,,,', 'dis@example.com,,Back,,,,', 'fresh@example.com,,F,,,,'];
    const { id } = await importFile(a, file(rows), { strategy: 'skip', restoreDisabled: true });
    const body = await getImport(a, id);
    expect(body).toMatchObject({ addedCount: 1, updatedCount: 1, skippedCount: 1, malformedCount: 0 });
    const { lines } = await report(a, id);
    expect(lines.map((l) => l.slice(0, 3))).toEqual([['1', 'existing_contact', '']]);
  });

  test('an overwrite that changes nothing is unchanged; a re-import of the same file skips every row', async () => {
    const a = await account();
    const rows = ['k1@example.com,,A,1,yes,,x', 'k2@example.com,,B,2,no,,y'];
    const first = await importFile(a, file(rows), { strategy: 'overwrite' });
    expect((await getImport(a, first.id)).rejectedRowsUrl).toBeUndefined();
    const again = await importFile(a, file(rows), { strategy: 'overwrite' });
    expect(await getImport(a, again.id)).toMatchObject({ skippedCount: 2, addedCount: 0, updatedCount: 0 });
    const { lines } = await report(a, again.id);
    expect(lines.map((l) => l.slice(0, 2))).toEqual([
      ['1', 'unchanged'],
      ['2', 'unchanged'],
    ]);
  });
});

describe('the duplicate rows, found while the merge runs', () => {
  /** An import of `rows`, uploaded and run until its dedupe has committed: the run gives way before its merge. */
  async function dedupedImport(a: Account, rows: string[]) {
    const { id, logs, deps } = await uploaded(a, rows, '3');
    const deduped = () => logs.some((l) => l.msg === 'import deduplicated');
    expect(await runImport({ ...deps, giveWay: deduped }, a.id, id)).toBe('yielded');
    expect((await loadImport(t.db.sql, a.id, id))?.phase).toBe('merge');
    return { id, logs, run: () => runImport(deps, a.id, id) };
  }
  /** Whether the staged rows are still there (own tables are dropped after, pooled ones emptied). */
  const rowsKept = async (id: string) => {
    const { rows } = await stagingOf(t.db.sql, id);
    const [{ present } = { present: false }] = await t.db.sql<{ present: boolean }[]>`
      select to_regclass(${rows}) is not null as present`;
    if (!present) return false;
    return (await t.db.sql.unsafe<{ kept: boolean }[]>(`select exists (select 1 from ${rows}) as kept`))[0]!.kept;
  };
  const duplicatesRecorded = async (id: string) =>
    Number(
      (
        await t.db.sql.unsafe<{ n: string }[]>(
          `select count(*) as n from ${(await stagingOf(t.db.sql, id)).rejects} where reason = 'duplicate_in_file'`,
        )
      )[0]!.n,
    );
  const rows = ROWS.filter(([, reason]) => !['seed_address', 'disabled_contact', 'unchanged'].includes(reason!));

  test('a run stopped after its dedupe: none recorded, the rows kept; the next run records them', async () => {
    const a = await account();
    const { id, logs, run } = await dedupedImport(
      a,
      rows.map((r) => r[0]),
    );
    expect(await rowsKept(id)).toBe(true);
    expect(await duplicatesRecorded(id)).toBe(0);

    expect(await run()).toBe('ended');
    expect(logs.find((l) => l.msg === 'import duplicate rows recorded')?.fields).toMatchObject({
      importId: id,
      rows: 2,
    });
    expect(await rowsKept(id)).toBe(false);
    const { lines } = await report(a, id);
    const want = expected(rows);
    expect(lines.map((l) => [l[0], l[1], l[2], l[3]!.length > 0])).toEqual(
      want.map((w) => [w.row, w.reason, w.column, true]),
    );
    const imported = 'Row 13 has the same email address and was imported instead (the last row of an email wins).';
    expect(lines.filter((l) => l[1] === 'duplicate_in_file').map((l) => [l[0], l[3]])).toEqual([
      ['11', imported],
      ['12', imported],
    ]);
    expect(await getImport(a, id)).toMatchObject({ status: 'success', duplicateInFileCount: 2, malformedCount: 12 });
  });

  test('staged rows lost before they were found: the file is read again, the report exact', async () => {
    const a = await account();
    const { id, logs, run } = await dedupedImport(
      a,
      rows.map((r) => r[0]),
    );
    // As a crash of PostgreSQL leaves an unlogged table: empty.
    await t.db.sql.unsafe(`truncate ${(await stagingOf(t.db.sql, id)).rows}`);
    expect(await run()).toBe('ended');
    expect(logs.find((l) => l.msg === 'import staging lost; reading the file again')?.fields).toMatchObject({
      importId: id,
      from: 'merge',
    });
    const { lines } = await report(a, id);
    expect(lines.map((l) => [l[0], l[1], l[2]])).toEqual(expected(rows).map((w) => [w.row, w.reason, w.column]));
    expect(await getImport(a, id)).toMatchObject({
      status: 'success',
      duplicateInFileCount: 2,
      malformedCount: 12,
      addedCount: 3,
    });
  });

  test('while the API is busy the scan goes in paced pieces of pages; duplicates pieces apart all found', async () => {
    const a = await account();
    // Wide rows (~600 bytes staged), so the staged rows span several pieces of PACED_PAGES; every
    // 100th email of the first half comes again in the second half, pieces away from its first row.
    const half = 16 * PACED_PAGES;
    const wide = 'w'.repeat(250);
    const email = (i: number) =>
      i < half ? `e${i}@example.com` : (i - half) % 100 === 0 ? `e${i - half}@example.com` : `u${i}@example.com`;
    const lines = Array.from({ length: 2 * half }, (_, i) => `${email(i)},,${wide},${i},no,,${'t'.repeat(200)}`);
    const { id, logs, deps } = await uploaded(a, lines, '5000');
    const config = { ...deps.config, importPace: 1 };
    expect(await runImport({ ...deps, config, apiBusy: () => true }, a.id, id)).toBe('ended');

    const scan = logs.find((l) => l.msg === 'import duplicate rows recorded')?.fields;
    const dups = Array.from({ length: Math.ceil(half / 100) }, (_, k) => k * 100);
    expect(scan).toMatchObject({ importId: id, rows: dups.length });
    // 2 × 16 × PACED_PAGES rows of ~600 bytes: 3 pieces of PACED_PAGES pages or more, each rested
    // after; on a Citus cluster the staged rows are one distributed table, scanned in one piece.
    const onCluster = (await testServices()).citusWorkers.length > 0;
    if (onCluster) expect(scan.pacedPieces).toBe(1);
    else expect(scan.pacedPieces).toBeGreaterThanOrEqual(3);
    expect(scan.restedMs).toBeGreaterThan(0);
    const { lines: reported } = await report(a, id);
    expect(reported.filter((l) => l[1] === 'duplicate_in_file').map((l) => [l[0], l[3]])).toEqual(
      dups.map((i) => [
        String(i + 1),
        `Row ${half + i + 1} has the same email address and was imported instead (the last row of an email wins).`,
      ]),
    );
    expect(await getImport(a, id)).toMatchObject({
      status: 'success',
      duplicateInFileCount: dups.length,
      addedCount: 2 * half - dups.length,
    });
  });

  test('a file without repeated emails: its staged rows are let go without a scan', async () => {
    const a = await account();
    const { id, logs, run } = await dedupedImport(a, ['one@example.com,,A,1,no,,', 'bad,,B,1,no,,']);
    // Its own rows table is dropped in the dedupe's commit; on a cluster the pooled set keeps a small
    // import's rows until it is released after success (worker/import/staging.ts, KEPT_UNTIL_RELEASE).
    const pooled = await onCluster(t.db.sql);
    const { rows } = await stagingOf(t.db.sql, id);
    expect(await rowsKept(id)).toBe(pooled);
    expect(await run()).toBe('ended');
    // Let go after: dropped (own), or emptied or dropped with its set (pooled).
    const [{ present } = { present: true }] = await t.db.sql<{ present: boolean }[]>`
      select to_regclass(${rows}) is not null as present`;
    const left = present ? (await t.db.sql.unsafe<{ n: number }[]>(`select count(*)::int as n from ${rows}`))[0]!.n : 0;
    expect(left).toBe(0);
    if (!pooled) expect(present).toBe(false);
    expect(logs.some((l) => l.msg === 'import duplicate rows recorded')).toBe(false);
    const { lines } = await report(a, id);
    expect(lines.map((l) => [l[0], l[1]])).toEqual([['2', 'invalid_email']]);
  });
});

describe('no report', () => {
  test('an import that rejected nothing has no rejectedRowsUrl and its report is a 404', async () => {
    const a = await account();
    const { id } = await importFile(a, file(['clean@example.com,,C,1,yes,,']));
    expect((await getImport(a, id)).rejectedRowsUrl).toBeUndefined();
    const res = await t.call('GET', `/v1/contact-imports/${id}/rejected-rows`, { key: a.key });
    expect(expectProblem(res, 404, 'not_found_error').detail).toContain('rejected no rows');
  });

  test('before the import ends (awaiting upload, uploaded) and after it failed: 404', async () => {
    const a = await account();
    const created = await t.call('POST', '/v1/contact-imports', {
      key: a.key,
      body: { columns: COLUMNS, duplicateContactStrategy: 'keep' },
    });
    const path = `/v1/contact-imports/${created.body.id}/rejected-rows`;
    expect(expectProblem(await t.call('GET', path, { key: a.key }), 404, 'not_found_error').detail).toContain(
      'awaiting-upload',
    );
    await put(new Request(created.body.uploadUrl, { method: 'PUT', body: file(['bad-email,,x,1,no,,']) }));
    expect(expectProblem(await t.call('GET', path, { key: a.key }), 404, 'not_found_error').detail).toContain(
      'uploaded',
    );
    const b = await account(); // a's import is open: one at a time
    const failed = await importFile(b, 'Wrong,Header\nx,y\n');
    expect((await getImport(b, failed.id)).status).toBe('failed');
    const res = await t.call('GET', `/v1/contact-imports/${failed.id}/rejected-rows`, { key: b.key });
    expect(expectProblem(res, 404, 'not_found_error').detail).toContain('failed');
  });

  test("another account's import, an unknown id: 404; not a uuid: 400; no key: 401", async () => {
    const a = await account();
    const b = await account();
    const { id } = await importFile(a, file(['bad-email,,x,1,no,,']));
    expect((await getImport(a, id)).rejectedRowsUrl).toBeDefined();
    const other = await t.call('GET', `/v1/contact-imports/${id}/rejected-rows`, { key: b.key });
    expectProblem(other, 404, 'not_found_error');
    const unknown = await t.call('GET', `/v1/contact-imports/${crypto.randomUUID()}/rejected-rows`, { key: a.key });
    expectProblem(unknown, 404, 'not_found_error');
    const bad = await t.call('GET', '/v1/contact-imports/nope/rejected-rows', { key: a.key });
    expectProblem(bad, 400, 'invalid_request_error');
    expectProblem(
      await t.call('GET', `/v1/contact-imports/${id}/rejected-rows`, { key: null }),
      401,
      'authentication_error',
    );
    const writeOnly = await createKey(t.db.sql, a.id, ['imports:write']);
    expectProblem(
      await t.call('GET', `/v1/contact-imports/${id}/rejected-rows`, { key: writeOnly }),
      403,
      'permission_error',
    );
  });

  test('REJECTED_ROWS_REPORT=false: nothing is recorded and there is no report', async () => {
    const a = await account();
    const { id } = await importFile(a, file(ROWS.map((r) => r[0])), { config: { rejectedRowsReport: false } });
    const body = await getImport(a, id);
    expect(body.malformedCount).toBe(12);
    expect(body.rejectedRowsUrl).toBeUndefined();
    expect(await store.head(rejectedRowsObjectKey(a.id, id))).toBeUndefined();
    expectProblem(
      await t.call('GET', `/v1/contact-imports/${id}/rejected-rows`, { key: a.key }),
      404,
      'not_found_error',
    );
  });

  test('past its retention the sweep removes the report: no rejectedRowsUrl, 404, the object gone', async () => {
    const a = await account();
    const { id } = await importFile(a, file(['bad-email,,x,1,no,,']));
    const [kept] = await t.db.sql<{ days: number }[]>`
      select round(extract(epoch from rejected_rows_expires_at - completed_at) / 86400)::int as days
      from contact_imports where id = ${id}`;
    expect(kept!.days).toBe(30);
    const notYet = await sweep({ sql: t.db.sql, storage: store, queue: bed.queue, eventRetentionDays: 7 });
    expect(notYet.reportsRemoved).not.toContain(id);
    await t.db.sql`update contact_imports set rejected_rows_expires_at = now() - interval '1 second' where id = ${id}`;
    // Past its time the report is gone for the API at once, before any sweep.
    expect((await getImport(a, id)).rejectedRowsUrl).toBeUndefined();
    const result = await sweep({ sql: t.db.sql, storage: store, queue: bed.queue, eventRetentionDays: 7 });
    expect(result.reportsRemoved).toContain(id);
    expect(await store.head(rejectedRowsObjectKey(a.id, id))).toBeUndefined();
    const res = await t.call('GET', `/v1/contact-imports/${id}/rejected-rows`, { key: a.key });
    expect(expectProblem(res, 404, 'not_found_error').detail).toContain('no longer kept');
  });
});

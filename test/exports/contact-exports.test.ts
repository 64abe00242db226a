import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { gunzipSync } from 'node:zlib';
import Papa from 'papaparse';
import type { Sql } from '../../src/db';
import { setLogLevel } from '../../src/log';
import { runImport } from '../../worker/import/index';
import { runNextExport } from '../../worker/exports/loop';
import { removeExpiredExports } from '../../worker/exports/expire';
import { expectProblem, testApp, type TestApp } from '../helpers/app';
import { createAccount, createAttribute, createBrand, createKey } from '../helpers/fixtures';
import { importRow, stageImport, tempStore, testConfig } from '../helpers/file-store';

let t: TestApp;
let files: Awaited<ReturnType<typeof tempStore>>;
const token = crypto.randomUUID();

beforeAll(async () => {
  setLogLevel('warn');
  files = await tempStore();
  t = await testApp({ storage: files.store } as never);
});
afterAll(async () => {
  await t.close();
  await files.remove();
});

/** The worker's side, in process: claims and runs the next export. */
const work = () => runNextExport(t.db.sql, files.store, token, 7);

/** POSTs an export of `key`'s account, runs it, and returns it as GET answers after. */
async function exported(body: unknown = {}, key = t.key) {
  const created = await t.call('POST', '/v1/contact-exports', { body, key });
  expect(created.status).toBe(202);
  expect(await work()).toBe('success');
  const got = await t.call('GET', `/v1/contact-exports/${created.body.id}`, { key });
  expect(got.status).toBe(200);
  return got.body;
}

/** The file behind a download link, as bytes (the local store's link is the API's own route). */
async function download(url: string): Promise<Buffer> {
  const u = new URL(url);
  const res = await t.app.handle(new Request(`http://localhost${u.pathname}`));
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

const parse = (text: string) =>
  Papa.parse<string[]>(text.replace(/\n$/, ''), { delimiter: ',', header: false }).data as string[][];

/** Every column of every contact of the account, as PostgreSQL holds it: "changes no contact" is this equal. */
async function contactRows(sql: Sql, accountId: string) {
  return sql`
    select email_md5, email, attributes::text, brand_ids::text, enabled, created_at, updated_at, hard_bounced,
      hard_bounced_at, first_source, first_import_id, first_import_method
    from contacts where account_id = ${accountId} order by email_md5`;
}

/** Imports `csv` into the account (columns from its header) with `overwrite`, as the worker would. */
async function importFile(accountId: string, csv: string | Uint8Array, columns: string[]) {
  const id = await stageImport(t.db.sql, files.store, accountId, csv, { columns, strategy: 'overwrite' });
  await runImport({ sql: t.db.sql, storage: files.store, config: testConfig(1000) }, accountId, id);
  return importRow(t.db.sql, accountId, id);
}

function pointerOf(res: Awaited<ReturnType<TestApp['call']>>): string {
  const body = expectProblem(res, 400, 'invalid_request_error');
  return body.errors[0].pointer;
}

describe('POST /v1/contact-exports: validation', () => {
  beforeAll(async () => {
    await createAttribute(t.db.sql, t.accountId, 'mail', 'email');
  });
  const post = (body: unknown) => t.call('POST', '/v1/contact-exports', { body });

  test('an unknown column is a 400 at /columns/<index>', async () => {
    expect(pointerOf(await post({ columns: ['Email', 'nope'] }))).toBe('/columns/1');
  });
  test('a repeated column, in any case, is a 400 at the repeat', async () => {
    expect(pointerOf(await post({ columns: ['Email', 'mail', 'MAIL'] }))).toBe('/columns/2');
  });
  test('a derived sub-attribute is never a column', async () => {
    const res = await post({ columns: ['Email', 'mail:md5'] });
    expect(pointerOf(res)).toBe('/columns/1');
    expect(res.body.detail).toContain('derived');
  });
  test('columns without Email is a 400 at /columns', async () => {
    expect(pointerOf(await post({ columns: ['mail'] }))).toBe('/columns');
    expect(pointerOf(await post({ columns: [] }))).toBe('/columns');
  });
  test("a brand id that is not the account's is a 400 at /filter/brandIds", async () => {
    expect(pointerOf(await post({ filter: { brandIds: [crypto.randomUUID()] } }))).toBe('/filter/brandIds');
  });
  test('a bad compression is a 400 at /compression', async () => {
    expect(pointerOf(await post({ compression: 'zip' }))).toBe('/compression');
  });
  test('unknown fields, at the top and in filter, are 400s', async () => {
    expect(pointerOf(await post({ colums: ['Email'] }))).toBe('/colums');
    expect(pointerOf(await post({ filter: { enabld: true } }))).toBe('/filter/enabld');
  });
  test('a key without contacts:read is 403', async () => {
    const key = await createKey(t.db.sql, t.accountId, ['contacts:write']);
    expectProblem(await t.call('POST', '/v1/contact-exports', { body: {}, key }), 403, 'permission_error');
  });
  test('nothing was queued by the refused requests', async () => {
    expect((await t.call('GET', '/v1/contact-exports')).body.data).toEqual([]);
  });
});

describe('one export of an account at a time; GET and list', () => {
  let other: { accountId: string; key: string };
  beforeAll(async () => {
    const accountId = await createAccount(t.db.sql, 'exports-list');
    other = { accountId, key: await createKey(t.db.sql, accountId) };
  });

  test('a second export while one is queued is 409 operation_in_progress with Retry-After', async () => {
    const first = await t.call('POST', '/v1/contact-exports', { body: {}, key: other.key });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ status: 'queued', compression: 'none', filter: {} });
    const second = await t.call('POST', '/v1/contact-exports', { body: { compression: 'gzip' }, key: other.key });
    expectProblem(second, 409, 'operation_in_progress');
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await work()).toBe('success');
    const third = await t.call('POST', '/v1/contact-exports', { body: {}, key: other.key });
    expect(third.status).toBe(202);
    expect(await work()).toBe('success');
  });

  test("404 for an id that is not one of the account's exports", async () => {
    expectProblem(await t.call('GET', `/v1/contact-exports/${crypto.randomUUID()}`), 404, 'not_found_error');
    const [theirs] = (await t.call('GET', '/v1/contact-exports', { key: other.key })).body.data;
    expectProblem(await t.call('GET', `/v1/contact-exports/${theirs.id}`), 404, 'not_found_error');
  });

  test('the list is newest first with page/pageSize, totalCount counting every export', async () => {
    for (let i = 0; i < 9; i++) await exported({}, other.key);
    const p1 = await t.call('GET', '/v1/contact-exports?pageSize=10', { key: other.key });
    const p2 = await t.call('GET', '/v1/contact-exports?pageSize=10&page=2', { key: other.key });
    expect(p1.body.pagination).toEqual({ page: 1, pageSize: 10, totalCount: 11, totalPages: 2 });
    expect(p2.body.data.length).toBe(1);
    const all = [...p1.body.data, ...p2.body.data];
    const created = all.map((e) => e.createdAt);
    expect(created).toEqual([...created].sort().reverse());
    expect(new Set(all.map((e) => e.id)).size).toBe(11);
    const unknown = await t.call('GET', '/v1/contact-exports?limit=5', { key: other.key });
    expect(expectProblem(unknown, 400, 'invalid_request_error').errors[0].parameter).toBe('limit');
  });

  test('every GET makes a fresh download link, valid one hour', async () => {
    const [latest] = (await t.call('GET', '/v1/contact-exports', { key: other.key })).body.data;
    const a = (await t.call('GET', `/v1/contact-exports/${latest.id}`, { key: other.key })).body;
    await Bun.sleep(1_100);
    const b = (await t.call('GET', `/v1/contact-exports/${latest.id}`, { key: other.key })).body;
    expect(a.status).toBe('success');
    expect(b.downloadUrl).not.toBe(a.downloadUrl);
    expect(Date.parse(b.downloadExpiresAt)).toBeGreaterThan(Date.parse(a.downloadExpiresAt));
    expect(Math.abs(Date.parse(b.downloadExpiresAt) - Date.now() - 3600_000)).toBeLessThan(5_000);
    expect((await download(a.downloadUrl)).toString()).toBe('Email,Brand\n');
    // A link whose token was tampered with is refused.
    const forged = new URL(b.downloadUrl).pathname.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
    expect((await t.app.handle(new Request(`http://localhost${forged}`))).status).toBe(403);
  });
});

describe('the file: every value as the importer reads it', () => {
  let account: { accountId: string; key: string };
  let brandA: string;
  let brandB: string;
  const tricky = [
    'plain',
    'comma, inside',
    'quote " inside',
    '"quoted"',
    'line\nbreak',
    'crlf\r\nbreak',
    'semi;colon',
    'back\\slash',
    'back\\;slash-semicolon',
    'unicode ✓ 日本語 😀',
    '=1+2',
  ];
  const lists = [
    ['a', 'b'],
    ['semi;colon', 'x'],
    ['ends with\\', 'next'],
    ['\\;', ';', 'tail\\'],
    ['quote "q"', 'comma,c', 'nl\nx'],
  ];

  beforeAll(async () => {
    const accountId = await createAccount(t.db.sql, 'exports-values');
    account = { accountId, key: await createKey(t.db.sql, accountId) };
    for (const [name, type] of [
      ['text', 'string'],
      ['n', 'number'],
      ['flag', 'boolean'],
      ['tags', 'array'],
      ['work', 'email'],
      ['Odd, "name"', 'string'],
    ] as const)
      await createAttribute(t.db.sql, accountId, name, type);
    brandA = await createBrand(t.db.sql, accountId, 'A');
    brandB = await createBrand(t.db.sql, accountId, 'B');
    const numbers = [42, -1.5, 0.1, 1e21, 1e-7, 123456789012345, 5e-324, -Number.MAX_VALUE];
    for (let i = 0; i < tricky.length; i++) {
      const attributes: Record<string, unknown> = { text: tricky[i], n: numbers[i % numbers.length] };
      if (i % 3 !== 2) attributes.flag = i % 3 === 0;
      if (i < lists.length) attributes.tags = lists[i];
      if (i === 0) attributes.work = 'Work@Example.com';
      if (i === 1) attributes['Odd, "name"'] = 'odd';
      const res = await t.call('POST', '/v1/contacts', {
        key: account.key,
        body: { email: `c${i}@example.com`, attributes, ...(i % 2 === 0 && { brandIds: [brandA, brandB] }) },
      });
      expect(res.status).toBe(201);
    }
    // A contact with no attribute and no brand: every other cell empty.
    await t.call('POST', '/v1/contacts', { key: account.key, body: { email: 'bare@example.com' } });
  });

  async function fileOf(body: unknown) {
    const e = await exported(body, account.key);
    const bytes = await download(e.downloadUrl);
    return { e, text: (e.compression === 'gzip' ? gunzipSync(bytes) : bytes).toString('utf8') };
  }

  test('header in schema order, rows with text as stored, canonical numbers, true/false, lists joined', async () => {
    const { e, text } = await fileOf({});
    expect(e.columns).toEqual(['Email', 'Brand', 'text', 'n', 'flag', 'tags', 'work', 'Odd, "name"']);
    expect(e.rowCount).toBe(tricky.length + 1);
    expect(text.split('\n')[0]).toBe('Email,Brand,text,n,flag,tags,work,"Odd, ""name"""');
    const rows = parse(text);
    const byEmail = new Map(rows.slice(1).map((r) => [r[0], r]));
    expect(byEmail.get('bare@example.com')).toEqual(['bare@example.com', '', '', '', '', '', '', '']);
    // Empty cells, not quoted empty strings (no brands is no value, as an absent attribute).
    expect(text.split('\n')).toContain('bare@example.com,,,,,,,');
    expect(byEmail.get('c0@example.com')).toEqual([
      'c0@example.com',
      `${brandA};${brandB}`,
      'plain',
      '42',
      'true',
      'a;b',
      'Work@Example.com',
      '',
    ]);
    for (let i = 0; i < tricky.length; i++) expect(byEmail.get(`c${i}@example.com`)![2]).toBe(tricky[i]!);
    expect(byEmail.get('c1@example.com')!.slice(3, 6)).toEqual(['-1.5', 'false', 'semi\\;colon;x']);
    expect(byEmail.get('c1@example.com')![7]).toBe('odd');
    expect(byEmail.get('c2@example.com')!.slice(3, 6)).toEqual(['0.1', '', 'ends with\\ ;next']);
    expect(byEmail.get('c3@example.com')![5]).toBe('\\\\;;\\;;tail\\ ');
    expect(byEmail.get('c4@example.com')![5]).toBe('quote "q";comma,c;nl\nx');
    // jsonb prints very large and very small numbers as plain decimals; the importer reads the same number.
    expect(byEmail.get('c3@example.com')![3]).toBe('1000000000000000000000');
    expect(byEmail.get('c4@example.com')![3]).toBe('0.0000001');
    expect(byEmail.get('c5@example.com')![3]).toBe('123456789012345');
    // Their plain decimals would be over 255 characters: float8's shortest text of the same double.
    expect(byEmail.get('c6@example.com')![3]).toBe('5e-324');
    expect(byEmail.get('c7@example.com')![3]).toBe('-1.7976931348623157e+308');
  });

  test('columns as asked, in their order and the schema spelling; filters by brand and enabled', async () => {
    const { e, text } = await fileOf({ columns: ['TAGS', 'email'], filter: { brandIds: [brandB], enabled: true } });
    expect(e.columns).toEqual(['tags', 'Email']);
    expect(e.filter).toEqual({ brandIds: [brandB], enabled: true });
    const rows = parse(text);
    expect(rows[0]).toEqual(['tags', 'Email']);
    expect(
      rows
        .slice(1)
        .map((r) => r[1])
        .sort(),
    ).toEqual([
      'c0@example.com',
      'c10@example.com',
      'c2@example.com',
      'c4@example.com',
      'c6@example.com',
      'c8@example.com',
    ]);
    await t.call('POST', `/v1/contacts/${md5('c0@example.com')}/disable`, { key: account.key, body: {} });
    const disabled = await fileOf({ columns: ['Email'], filter: { enabled: false } });
    expect(disabled.text).toBe('Email\nc0@example.com\n');
  });

  test('same account, overwrite: changes no contact (every column, updated_at included)', async () => {
    for (const compression of ['none', 'gzip'] as const) {
      const before = await contactRows(t.db.sql, account.accountId);
      const { e, text } = await fileOf({ compression });
      const result = await importFile(account.accountId, text, e.columns);
      expect(result).toMatchObject({ status: 'success', malformedCount: 0, addedCount: 0, updatedCount: 0 });
      expect(result.skippedCount).toBe(before.length);
      expect(await contactRows(t.db.sql, account.accountId)).toEqual(before);
    }
  });

  test('no Brand, another account, same schema: emails and attributes', async () => {
    const target = await createAccount(t.db.sql, 'exports-target');
    for (const a of await t.db.sql<{ name: string; type: string }[]>`
      select name, type from schema_attributes where account_id = ${account.accountId} order by position`)
      await createAttribute(t.db.sql, target, a.name, a.type);
    const columns = ['Email', 'text', 'n', 'flag', 'tags', 'work', 'Odd, "name"'];
    const { e, text } = await fileOf({ columns, compression: 'gzip' });
    expect(e.compression).toBe('gzip');
    const result = await importFile(target, text, e.columns);
    expect(result).toMatchObject({ status: 'success', malformedCount: 0, addedCount: e.rowCount });
    const people = (id: string) => t.db.sql`
      select email, attributes from contacts where account_id = ${id} order by email`;
    expect(await people(target)).toEqual(await people(account.accountId));
  });
});

describe('retention', () => {
  test('the sweep removes a file past EXPORT_RETENTION_DAYS; the export then has no downloadUrl', async () => {
    const accountId = await createAccount(t.db.sql, 'exports-retention');
    const key = await createKey(t.db.sql, accountId);
    const e = await exported({}, key);
    expect(e.downloadUrl).toBeString();
    const [row] = await t.db.sql<{ object_key: string }[]>`
      select object_key from contact_exports where account_id = ${accountId} and id = ${e.id}`;
    expect(await files.store.head(row!.object_key)).toBeDefined();
    await t.db.sql`
      update contact_exports set file_expires_at = now() - interval '1 second'
      where account_id = ${accountId} and id = ${e.id}`;
    expect(await removeExpiredExports(t.db.sql, files.store)).toContain(e.id);
    expect(await files.store.head(row!.object_key)).toBeUndefined();
    const after = (await t.call('GET', `/v1/contact-exports/${e.id}`, { key })).body;
    expect(after).toMatchObject({ status: 'success', rowCount: 0 });
    expect(after.downloadUrl).toBeUndefined();
    expect(after.downloadExpiresAt).toBeUndefined();
    // The link handed out before is dead too.
    expect((await t.app.handle(new Request(`http://localhost${new URL(e.downloadUrl).pathname}`))).status).toBe(404);
  });
});

function md5(email: string): string {
  return new Bun.CryptoHasher('md5').update(email.toLowerCase()).digest('hex');
}

/**
 * Export and import agree exactly (issue 54): whatever the API stores comes back unchanged through
 * an export and an import. Random contacts over every attribute type, their edge values included
 * (spaces, line breaks and a BOM around or inside a text, `\` and `;` in list entries, numbers at
 * the edges of a double, emails in capitals), are written through POST and PATCH /v1/contacts; the
 * account is exported (plain and gzip, in turn) and the file imported
 * - back into the same account with `overwrite`, through POST /v1/contact-imports and the upload
 *   link: every row skipped, no contact changed (every column, `updated_at` included);
 * - without Brand into a fresh account with the same schema, through the admin CLI's manual import:
 *   the same emails and attributes, exactly (jsonb text).
 * A value the API refuses is refused with its pointer and takes no part. A list is kept to what fits
 * one cell (at most 255 characters joined) and a contact to 6 brands: a longer cell makes its row
 * malformed, the one exception the contract makes (docs/exports-and-erasure.md "Contact exports").
 */
import { expect, test } from 'bun:test';
import { gunzipSync } from 'node:zlib';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import type { Sql } from '../../src/db';
import { setLogLevel } from '../../src/log';
import { importCommand } from '../../src/cli/admin/import';
import { runImport } from '../../worker/import/index';
import { runNextExport } from '../../worker/exports/loop';
import { createAccount, createAttribute, createBrand, createKey } from '../helpers/fixtures';
import { testConfig } from '../helpers/file-store';
import { parityBed } from '../helpers/parity';

setLogLevel('warn');
const bed = parityBed();

const SEED = 54;
const RUNS = 25;
const CONTACTS = 30;
const BRANDS = 6;
const SCHEMA = { text: 'string', note: 'string', n: 'number', flag: 'boolean', tags: 'array', work: 'email' } as const;
type Name = keyof typeof SCHEMA;

/** Everything String.prototype.trim removes that a sender's file or a request may carry. */
const SPACE = fc.constantFrom(' ', '  ', '\t', '\n', '\r\n', '\r', '\ufeff', '\u00a0', '\u3000', '\u2028', '\v');
const padded = (core: fc.Arbitrary<string>) =>
  fc
    .tuple(fc.array(SPACE, { maxLength: 2 }), core, fc.array(SPACE, { maxLength: 2 }))
    .map(([a, c, b]) => a.join('') + c + b.join(''));
/** Pieces that CSV, the list syntax or PostgreSQL's COPY treat specially. */
const TRICKY = fc.constantFrom(';', '\\', '\\;', '"', ',', '\n', '\r\n', '\r', '\ufeff', '\\.', '=1+2', '😀', 'é', ' ');
const pieces = (max: number) =>
  fc.array(fc.oneof(TRICKY, fc.string({ maxLength: 4 })), { maxLength: max }).map((p) => p.join(''));

const text = padded(
  fc.oneof(
    { weight: 4, arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }) },
    { weight: 4, arbitrary: pieces(8) },
    // At the limit, alone or between spaces; and values the API refuses (NUL, a lone surrogate, 256).
    { weight: 1, arbitrary: fc.constantFrom('x'.repeat(255), '😀'.repeat(255), `${'y'.repeat(254)};`, '\\.') },
    { weight: 1, arbitrary: fc.constantFrom('a\0b', 'a\ud800b', 'z'.repeat(256)) },
  ),
);

const number = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  fc.constantFrom(5e-324, -5e-324, Number.MAX_VALUE, -Number.MAX_VALUE, 1e21, 1e-7, 2 ** 53 + 1, 0.1 + 0.2, -0),
  fc.constantFrom(1e255, 1e256, -1e-250, 1.5e-251, 123456789012345680),
  // Numbers as text, as a request may send them.
  fc.constantFrom(
    ' 42 ',
    '1e3',
    '007',
    '-0',
    '.5',
    '+3',
    '1.50',
    `${'0'.repeat(300)}1`,
    '\ufeff9\r\n',
    '123456789012345678',
  ),
);

const boolean = fc.oneof(fc.boolean(), fc.constantFrom('Yes', ' no ', 'TRUE', '0', '1', '\tfalse\n'));

const email = padded(
  fc.oneof(
    fc.tuple(fc.emailAddress(), fc.boolean()).map(([e, up]) => (up ? e.toUpperCase() : e)),
    fc.constantFrom('Ann@Example.COM', 'W@X.IO', 'a.b+c@sub.example.org'),
  ),
);

/** Code points a list's export cell can take at most: every `;` escaped, a space after a final `\`. */
const cellBound = (entries: readonly string[]) =>
  entries.reduce((n, e) => n + [...e].length + e.split(';').length + 1, 0);
const entry = padded(fc.oneof(fc.string({ unit: 'grapheme', maxLength: 12 }), pieces(4)));
const entries = fc.array(entry, { maxLength: 6 }).filter((l) => cellBound(l) <= 255);
const list = fc.oneof(
  { weight: 4, arbitrary: entries },
  // List text, `;` separated, as a request may send it.
  { weight: 2, arbitrary: entries.map((l) => l.join(';')) },
  { weight: 1, arbitrary: fc.constantFrom(['x'.repeat(255)], [' \\ ', ';', '\\;'], '\\\\;x;\\') },
);

const VALUES: Record<Name, fc.Arbitrary<unknown>> = {
  text,
  note: text,
  n: number,
  flag: boolean,
  tags: list,
  work: email,
};
const values = fc.record(
  Object.fromEntries(Object.keys(SCHEMA).map((k) => [k, fc.option(VALUES[k as Name], { nil: undefined })])),
  { requiredKeys: [] },
);
const contact = fc.record({
  create: values,
  patch: values,
  brands: fc.subarray([...Array(BRANDS).keys()]),
  identity: fc.tuple(
    fc.array(SPACE, { maxLength: 2 }),
    fc.constantFrom('lower', 'UPPER', 'Mixed'),
    fc.array(SPACE, { maxLength: 2 }),
  ),
});
const contacts = fc.array(contact, { minLength: CONTACTS, maxLength: CONTACTS });

/** Drops undefined members: JSON has no undefined, and an absent key is what the generator meant. */
const defined = (o: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

/** Every column of every contact of the account, as PostgreSQL holds it: "changes no contact" is this equal. */
const contactRows = (sql: Sql, accountId: string) => sql`
  select email_md5, email, attributes::text, brand_ids::text, enabled, created_at, updated_at, hard_bounced,
    hard_bounced_at, first_source, first_import_id, first_import_method
  from contacts where account_id = ${accountId} order by email_md5`;

const people = (sql: Sql, accountId: string) => sql`
  select email_md5, email, attributes::text from contacts where account_id = ${accountId} order by email_md5`;

/** An account with the schema and brands; its key. */
async function account(name: string, brands: number) {
  const sql = bed.t.db.sql;
  const accountId = await createAccount(sql, name);
  for (const [attribute, type] of Object.entries(SCHEMA)) await createAttribute(sql, accountId, attribute, type);
  const brandIds: string[] = [];
  for (let b = 0; b < brands; b++) brandIds.push(await createBrand(sql, accountId, `brand ${b}`));
  return { accountId, key: await createKey(sql, accountId), brandIds };
}

/** POSTs an export, runs it as the worker does, and returns its columns and the file's text. */
async function exportFile(key: string, body: object) {
  const { t } = bed;
  const created = await t.call('POST', '/v1/contact-exports', { body, key });
  expect(created.status).toBe(202);
  expect(await runNextExport(t.db.sql, bed.storage, crypto.randomUUID(), 7)).toBe('success');
  const got = await t.call('GET', `/v1/contact-exports/${created.body.id}`, { key });
  const res = await t.app.handle(new Request(`http://localhost${new URL(got.body.downloadUrl).pathname}`));
  expect(res.status).toBe(200);
  const bytes = Buffer.from(await res.arrayBuffer());
  expect(bytes[0] === 0x1f && bytes[1] === 0x8b).toBe(got.body.compression === 'gzip');
  const plain = got.body.compression === 'gzip' ? gunzipSync(bytes) : bytes;
  return { columns: got.body.columns as string[], bytes, text: plain.toString('utf8') };
}

/** An API import of `file` into the key's account with `overwrite`: POST, PUT to the link, the pipeline. */
async function apiImport(key: string, accountId: string, columns: string[], file: Uint8Array) {
  const { t } = bed;
  const created = await t.call('POST', '/v1/contact-imports', {
    body: { columns, duplicateContactStrategy: 'overwrite' },
    key,
  });
  expect(created.status).toBe(201);
  expect((await bed.put(new Request(created.body.uploadUrl, { method: 'PUT', body: file }))).status).toBe(200);
  await runImport({ sql: t.db.sql, storage: bed.storage, config: testConfig(1000) }, accountId, created.body.id);
  return (await t.call('GET', `/v1/contact-imports/${created.body.id}`, { key })).body;
}

/** The admin CLI's manual import of `file` (a local file, plain or gzip) into the account. */
async function manualImport(accountId: string, file: Uint8Array) {
  const path = join(tmpdir(), `round-trip-${crypto.randomUUID()}.csv`);
  await writeFile(path, file);
  try {
    const flags = { account: accountId, file: path, strategy: 'overwrite' };
    return await importCommand(bed.t.db.sql, testConfig(1000), flags, bed.storage);
  } finally {
    await rm(path, { force: true });
  }
}

test(`property: ${RUNS} runs of ${CONTACTS} contacts (seed ${SEED}) export and import back unchanged`, async () => {
  const { t } = bed;
  const sql = t.db.sql;
  const started = performance.now();
  let run = 0;
  let stored = 0;
  let refused = 0;
  await fc.assert(
    fc.asyncProperty(contacts, async (generated) => {
      run++;
      const source = await account(`round-trip ${run}`, BRANDS);
      for (const [i, c] of generated.entries()) {
        const [lead, word, trail] = c.identity;
        const address = `${lead.join('')}${word}${i}@Example.COM${trail.join('')}`;
        const brandIds = c.brands.map((b) => source.brandIds[b]!);
        const res = await t.call('POST', '/v1/contacts', {
          key: source.key,
          body: { email: address, attributes: defined(c.create), brandIds },
        });
        // A refusal is the value's, with its pointer; nothing is stored for it.
        if (res.status === 400) {
          expect(res.body.errors[0].pointer).toMatch(/^\/attributes\//);
          refused++;
          continue;
        }
        expect(res.status).toBe(201);
        const patch = defined(c.patch);
        if (Object.keys(patch).length === 0) continue;
        const patched = await t.call('PATCH', `/v1/contacts/${res.body.emailMd5}`, {
          key: source.key,
          body: { attributes: patch },
        });
        if (patched.status === 400) expect(patched.body.errors[0].pointer).toMatch(/^\/attributes\//);
        else expect(patched.status).toBe(200);
      }
      const before = await contactRows(sql, source.accountId);
      stored += before.length;
      // The one rule: no value is stored with spaces around it, nor a list entry.
      for (const row of await people(sql, source.accountId))
        for (const v of Object.values(JSON.parse(row.attributes) as Record<string, unknown>))
          for (const s of Array.isArray(v) ? v : [v]) if (typeof s === 'string') expect(s).toBe(s.trim());

      // Plain and gzip in turn for each way back.
      const [same, fresh] = run % 2 === 0 ? (['none', 'gzip'] as const) : (['gzip', 'none'] as const);

      const whole = await exportFile(source.key, { compression: same });
      const back = await apiImport(source.key, source.accountId, whole.columns, whole.bytes);
      expect(back).toMatchObject({ status: 'success', malformedCount: 0, addedCount: 0, updatedCount: 0 });
      expect(back.skippedCount).toBe(before.length);
      expect(await contactRows(sql, source.accountId)).toEqual(before);

      const target = await account(`round-trip ${run} copy`, 0);
      const columns = whole.columns.filter((c) => c !== 'Brand');
      const copy = await exportFile(source.key, { columns, compression: fresh });
      expect(copy.text.split('\n')[0]).toBe(columns.join(','));
      const into = await manualImport(target.accountId, copy.bytes);
      expect(into).toMatchObject({ status: 'success', malformedCount: 0, addedCount: before.length });
      expect(await people(sql, target.accountId)).toEqual(await people(sql, source.accountId));
    }),
    { seed: SEED, numRuns: RUNS, endOnFailure: true },
  );
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(
    `export round trip: ${RUNS} runs × ${CONTACTS} contacts, seed ${SEED}: ${stored} stored, ` +
      `${refused} refused by the API, ${seconds} s`,
  );
  expect(run).toBe(RUNS);
  expect(stored).toBeGreaterThan(RUNS * CONTACTS * 0.6);
});

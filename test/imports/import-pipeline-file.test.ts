/**
 * The import pipeline's file handling, failure modes, events, progress and restarts, against a
 * real database and the local object store.
 */
import { describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import type { ObjectStore } from '../../src/storage/store';
import { ImportBusyError, runImport, UnrecoverableImportError } from '../../worker/import/index';
import { mergeBatchEnds } from '../helpers/batch-ends';
import { stagingTables } from '../../worker/import/staging';
import { importBed } from '../helpers/import-bed';
import { importRow, stageImport, testConfig, type ImportOptions } from '../helpers/file-store';
import { createAccount, createAttribute, createBrand } from '../helpers/fixtures';

const bed = importBed();

async function account() {
  const id = await createAccount(bed.db.sql);
  await createAttribute(bed.db.sql, id, 'firstName', 'string');
  await createAttribute(bed.db.sql, id, 'age', 'number');
  await createAttribute(bed.db.sql, id, 'vip', 'boolean');
  await createAttribute(bed.db.sql, id, 'tags', 'array');
  await createAttribute(bed.db.sql, id, 'work', 'email');
  return {
    id,
    alpha: await createBrand(bed.db.sql, id, 'Alpha'),
    semi: await createBrand(bed.db.sql, id, 'Beta;Gamma'),
    delta: await createBrand(bed.db.sql, id, 'Delta'),
  };
}

interface RunOptions extends Partial<ImportOptions> {
  batch?: number;
  storage?: ObjectStore;
  log?: (msg: string, fields?: object) => void;
}

async function stage(accountId: string, csv: string | Uint8Array, o: RunOptions = {}) {
  return stageImport(bed.db.sql, bed.files.store, accountId, csv, {
    ...o,
    columns: o.columns ?? ['Email', 'firstName'],
  });
}

function run(accountId: string, id: string, o: RunOptions = {}) {
  return runImport(
    { sql: bed.db.sql, storage: o.storage ?? bed.files.store, config: testConfig(o.batch ?? 3), log: o.log },
    accountId,
    id,
  );
}

async function importCsv(accountId: string, csv: string | Uint8Array, o: RunOptions = {}) {
  const id = await stage(accountId, csv, o);
  await run(accountId, id, o);
  return { id, row: await importRow(bed.db.sql, accountId, id) };
}

async function attributesOf(accountId: string) {
  const rows = await bed.db.sql<{ email: string; attributes: Record<string, unknown> }[]>`
    select email, attributes from contacts where account_id = ${accountId} order by email`;
  return Object.fromEntries(rows.map((r) => [r.email, r.attributes]));
}

async function leftovers(accountId: string, id: string) {
  const hex = id.replaceAll('-', '');
  const [t] = await bed.db.sql<
    { n: number }[]
  >`select count(*)::int as n from pg_class where relname like ${`import_%_${hex}`}`;
  const [b] = await bed.db.sql<
    { n: number }[]
  >`select count(*)::int as n from bulk_operations where account_id = ${accountId}`;
  const object = await bed.files.store.head(`contact-imports/${accountId}/${id}.csv`);
  return { tables: t!.n, bulkOperations: b!.n, object: object !== undefined };
}

describe('file format', () => {
  test('BOM, CRLF, quoted commas, quotes and newlines, blank lines; typed values stored typed', async () => {
    const a = await account();
    const csv =
      '\uFEFFEmail,firstName,age,vip,tags,work\r\n\r\n' +
      'a@example.com,"Smith, ""Jo""\r\nline two",1.5,Yes," x ; y\\;z ;",w@work.io\r\n' +
      '   \r\n' +
      'b@example.com,Bo,-2,0,,\r\n' +
      'c@example.com,,,,,'; // last line without a line break
    const { row } = await importCsv(a.id, csv, { columns: ['Email', 'firstName', 'age', 'vip', 'tags', 'work'] });
    expect(row).toMatchObject({ status: 'success', rowCount: 3, addedCount: 3, malformedCount: 0 });
    expect(await attributesOf(a.id)).toEqual({
      'a@example.com': {
        firstName: 'Smith, "Jo"\r\nline two',
        age: 1.5,
        vip: true,
        tags: ['x', 'y;z'],
        work: 'w@work.io',
      },
      'b@example.com': { firstName: 'Bo', age: -2, vip: false },
      'c@example.com': {},
    });
  });

  test('a row of empty cells is malformed (no address), a blank line is not a row', async () => {
    const a = await account();
    const { row } = await importCsv(a.id, 'Email,firstName\n\n,\n  \nx@example.com,X\n\n');
    expect(row).toMatchObject({ rowCount: 1, malformedCount: 1 });
  });

  test('a broken quote makes its row malformed (the parser reads on to the next quote)', async () => {
    const a = await account();
    const { row } = await importCsv(a.id, 'Email,firstName\nx@example.com,"ab"c,"\ny@example.com,Y\n');
    expect(row).toMatchObject({ rowCount: 1, malformedCount: 1 });
    expect(Object.keys(await attributesOf(a.id))).toEqual(['y@example.com']);
  });

  test('a quote left open in the last row: that row is malformed', async () => {
    const a = await account();
    const { row } = await importCsv(a.id, 'Email,firstName\ny@example.com,Y\nx@example.com,"open\n');
    expect(row).toMatchObject({ rowCount: 1, malformedCount: 1 });
  });

  test('a header-only file succeeds with nothing to import', async () => {
    const a = await account();
    const { id, row } = await importCsv(a.id, 'Email,firstName\r\n');
    expect(row).toMatchObject({
      status: 'success',
      rowCount: 0,
      addedCount: 0,
      updatedCount: 0,
      skippedCount: 0,
      malformedCount: 0,
      duplicateInFileCount: 0,
      percentComplete: null,
    });
    expect(await leftovers(a.id, id)).toEqual({ tables: 0, bulkOperations: 0, object: false });
  });
});

describe('brands', () => {
  test(
    'names in any case, ids, \\; in names, repeats once; import brands added; ' +
      'unknown or deleted brands are malformed',
    async () => {
      const a = await account();
      const gone = await createBrand(bed.db.sql, a.id, 'Gone');
      await bed.db.sql`update brands set deleted_at = now() where id = ${gone}`;
      const csv = [
        'Email,Brand',
        `a@example.com,ALPHA;${a.alpha.toUpperCase()};beta\\;gamma`,
        'b@example.com,',
        'c@example.com,Nobody',
        'd@example.com,gone',
        `e@example.com,${gone}`,
      ].join('\n');
      const { row } = await importCsv(a.id, csv, { columns: ['Email', 'Brand'], brandIds: [a.delta] });
      expect(row).toMatchObject({ rowCount: 2, addedCount: 2, malformedCount: 3 });
      const brands = await bed.db.sql<
        { email: string; b: string[] }[]
      >`select email, brand_ids::text[] as b from contacts where account_id = ${a.id} order by email`;
      expect([...brands]).toEqual([
        { email: 'a@example.com', b: [a.alpha, a.semi, a.delta] },
        { email: 'b@example.com', b: [a.delta] },
      ]);
    },
  );
});

describe('brand-subscribe events', () => {
  async function setup() {
    const a = await account();
    await bed.db.sql`
      insert into contacts (account_id, email_md5, email, brand_ids, first_source)
      values (${a.id}, md5('old@example.com')::uuid, 'old@example.com', ${bed.db.sql.array([a.alpha])}::uuid[], 'api')`;
    return a;
  }
  const csv = () => `Email,Brand\nnew@example.com,Alpha;Delta\nold@example.com,alpha;delta\nsame@example.com,\n`;

  test('one event per brand newly assigned, written by the import', async () => {
    const a = await setup();
    const { id } = await importCsv(a.id, csv(), { columns: ['Email', 'Brand'] });
    const events = await bed.db.sql<{ email: string; brand: string; source: string; importId: string }[]>`
      select c.email, e.brand_id::text as brand, e.source, e.import_id::text as "importId"
      from brand_subscribe_events e
      cross join lateral unnest(e.email_md5s) as m(email_md5)
      join contacts c on c.account_id = e.account_id and c.email_md5 = m.email_md5
      join brands b on b.account_id = e.account_id and b.id = e.brand_id
      where e.account_id = ${a.id} order by c.email, b.name`;
    expect([...events]).toEqual([
      { email: 'new@example.com', brand: a.alpha, source: 'import', importId: id },
      { email: 'new@example.com', brand: a.delta, source: 'import', importId: id },
      { email: 'old@example.com', brand: a.delta, source: 'import', importId: id },
    ]);
  });

  test(
    'stored as sets: one outbox row per brand per merge batch, ' + 'unnesting to exactly the (contact, brand) events',
    async () => {
      const a = await setup(); // old@example.com has Alpha
      const hex = (email: string) => createHash('md5').update(email).digest('hex');
      const news = Array.from({ length: 10 }, (_, i) => `s${i}@example.com`);
      const cell = (i: number) => (i % 3 === 0 ? 'Alpha;Delta' : i % 3 === 1 ? 'delta' : '');
      const csv = ['Email,Brand', ...news.map((e, i) => `${e},${cell(i)}`), 'old@example.com,Alpha;Delta'].join('\n');
      const expected: string[] = [];
      news.forEach((e, i) => {
        if (i % 3 === 0) expected.push(`${hex(e)} ${a.alpha}`, `${hex(e)} ${a.delta}`);
        if (i % 3 === 1) expected.push(`${hex(e)} ${a.delta}`);
      });
      expected.push(`${hex('old@example.com')} ${a.delta}`); // Alpha it had already
      // Batches are seq ranges of 4 and seq follows email_md5 order.
      const order = [...news, 'old@example.com'].map(hex).sort();
      const batchOf = (h: string) => Math.floor(order.indexOf(h) / 4);
      const logged: number[] = [];
      const log = (msg: string, fields?: object) => {
        if (msg === 'import merge batch') logged.push((fields as { events: number }).events);
      };
      const { id, row } = await importCsv(a.id, csv, { columns: ['Email', 'Brand'], batch: 4, log });
      expect(row).toMatchObject({ status: 'success', rowCount: 11, addedCount: 10, updatedCount: 1 });

      const rows = await bed.db.sql<{ brand: string; md5s: string[]; source: string; importId: string }[]>`
      select brand_id::text as brand, email_md5s::text[] as md5s, source, import_id::text as "importId"
      from brand_subscribe_events where account_id = ${a.id} order by id`;
      const sets = rows.map((r) => ({ ...r, md5s: r.md5s.map((m) => m.replaceAll('-', '')) }));
      for (const r of sets) {
        expect(r).toMatchObject({ source: 'import', importId: id });
        expect(r.md5s.length).toBeGreaterThan(0);
        expect(r.md5s).toEqual([...r.md5s].sort()); // ordered by email_md5
        expect(new Set(r.md5s.map(batchOf)).size).toBe(1); // one batch's contacts
      }
      const perBatchBrand = (pairs: string[]) =>
        new Set(pairs.map((p) => `${batchOf(p.split(' ')[0]!)} ${p.split(' ')[1]}`));
      expect(sets.length).toBe(perBatchBrand(expected).size);
      expect(new Set(sets.map((r) => `${batchOf(r.md5s[0]!)} ${r.brand}`))).toEqual(perBatchBrand(expected));
      expect(sets.flatMap((r) => r.md5s.map((m) => `${m} ${r.brand}`)).sort()).toEqual(expected.sort());
      // The batch result still counts (contact, brand) events, not outbox rows.
      expect(logged.reduce((x, y) => x + y, 0)).toBe(expected.length);
    },
  );

  test('none when publishBrandSubscribeEvents is false', async () => {
    const a = await setup();
    await importCsv(a.id, csv(), { columns: ['Email', 'Brand'], publishEvents: false });
    const [n] = await bed.db.sql<
      { n: number }[]
    >`select count(*)::int as n from brand_subscribe_events, unnest(email_md5s) where account_id = ${a.id}`;
    expect(n!.n).toBe(0);
  });
});

describe('failures', () => {
  async function expectFailed(csv: string | Uint8Array, reason: string, o: RunOptions = {}) {
    const a = await account();
    const id = await stage(a.id, csv, o);
    const error = await run(a.id, id, o).catch((e) => e);
    expect(error).toBeInstanceOf(UnrecoverableImportError);
    expect(await importRow(bed.db.sql, a.id, id)).toMatchObject({
      status: 'failed',
      failureReason: reason,
      percentComplete: null,
    });
    const [c] = await bed.db.sql<{ n: number }[]>`select count(*)::int as n from contacts where account_id = ${a.id}`;
    expect(c!.n).toBe(0);
    expect(await leftovers(a.id, id)).toEqual({ tables: 0, bulkOperations: 0, object: false });
    // A later delivery of the same job changes nothing.
    await run(a.id, id, o);
    expect((await importRow(bed.db.sql, a.id, id)).status).toBe('failed');
  }

  test('a header that does not match the declared columns, naming the first mismatch', async () => {
    await expectFailed('Email,lastname\nx@example.com,X\n', 'Header column 2 is "lastname", expected "firstName".');
  });

  test('a file that is not UTF-8, even far past rows already staged', async () => {
    const good = Buffer.from(
      `Email,firstName\n${Array.from({ length: 50 }, (_, i) => `u${i}@example.com,U`).join('\n')}\n`,
    );
    await expectFailed(
      Buffer.concat([good, Buffer.from([0x62, 0x40, 0x65, 0x2e, 0x63, 0x6f, 0x2c, 0xe9, 0x0a])]),
      'The file is not UTF-8 text.',
    );
  });

  test('a file that is not UTF-8, found while a COPY statement is open: the COPY is abandoned', async () => {
    const good = Buffer.from(
      `Email,firstName\n${Array.from({ length: 5000 }, (_, i) => `u${i}@example.com,U`).join('\n')}\n`,
    );
    await expectFailed(Buffer.concat([good, Buffer.from([0xff, 0x0a])]), 'The file is not UTF-8 text.', {
      batch: 100_000,
    });
  });

  test('an empty file, a file of only a BOM or blank lines', async () => {
    for (const csv of ['', '\uFEFF', '\r\n\n  \n']) await expectFailed(csv, 'The file is empty: it has no header row.');
  });

  test('a quote that is never closed, before the rest of a large file', async () => {
    const rest = Array.from({ length: 80_000 }, (_, i) => `u${i}@example.com,U`).join('\n');
    await expectFailed(
      `Email,firstName\nx@example.com,X\ny@example.com,"open\n${rest}\n`,
      'Data row 2 is not valid CSV: a quoted field is never closed, or the row is longer than 1048576 characters.',
    );
  });

  test('an object that is gone', async () => {
    const a = await account();
    const id = await stage(a.id, 'Email,firstName\nx@example.com,X\n');
    await bed.files.store.remove(`contact-imports/${a.id}/${id}.csv`);
    expect(await run(a.id, id).catch((e) => e)).toBeInstanceOf(UnrecoverableImportError);
    expect((await importRow(bed.db.sql, a.id, id)).failureReason).toContain('could not be read');
  });
});

describe('progress and restarts', () => {
  const rows = (n: number) =>
    `Email,firstName\n${Array.from({ length: n }, (_, i) => `p${i}@example.com,P${i}`).join('\n')}\n`;

  test('percentComplete moves per batch and reaches 100 with the last; absent once done', async () => {
    const a = await account();
    const seen: number[] = [];
    const { row } = await importCsv(a.id, rows(7), {
      batch: 3,
      log: (m, f) => m === 'import merge batch' && seen.push((f as { percentComplete: number }).percentComplete),
    });
    expect(seen).toEqual([42, 85, 100]);
    expect(row.percentComplete).toBeNull();
  });

  test('batches are exactly batchSize rows across merge table parts: percentComplete moves in spec steps', async () => {
    // 35 rows in batches of 10 stand for the spec's 350,000 in batches of 100,000: 28, 57, 85, 100.
    const emails = Array.from({ length: 35 }, (_, i) => `p${i}@example.com`);
    const md5s = emails.map((e) => Bun.MD5.hash(e, 'hex') as string);
    const boundary = stagingTables(crypto.randomUUID()).parts[1]!.from!.replaceAll('-', '');
    // The parts must not end on a batch boundary, or the test could not tell the difference.
    expect(md5s.filter((m) => m < boundary).length % 10).not.toBe(0);
    const a = await account();
    const seen: number[] = [];
    const checkpoints: number[] = [];
    const { row } = await importCsv(a.id, rows(35), {
      batch: 10,
      log: (m, f) => {
        if (m !== 'import merge batch') return;
        seen.push((f as { percentComplete: number }).percentComplete);
        checkpoints.push((f as { checkpoint: number }).checkpoint);
      },
    });
    expect(checkpoints).toEqual([10, 20, 30, 35]);
    expect(seen).toEqual([28, 57, 85, 100]);
    expect(row).toMatchObject({ status: 'success', rowCount: 35, addedCount: 35, percentComplete: null });
  });

  test('a file smaller than one batch shows 0 until its only batch is done, then 100', async () => {
    const a = await account();
    const id = await stage(a.id, rows(2));
    const stopAfterDedupe = (m: string) => {
      if (m === 'import deduplicated') throw new Error('worker died');
    };
    await run(a.id, id, { log: stopAfterDedupe }).catch(() => {});
    expect(await importRow(bed.db.sql, a.id, id)).toMatchObject({
      status: 'importing',
      phase: 'merge',
      rowCount: 2,
      percentComplete: 0,
    });
    const seen: number[] = [];
    await run(a.id, id, {
      log: (m, f) => m === 'import merge batch' && seen.push((f as { percentComplete: number }).percentComplete),
    });
    expect(seen).toEqual([100]);
    expect(await importRow(bed.db.sql, a.id, id)).toMatchObject({
      status: 'success',
      rowCount: 2,
      addedCount: 2,
      percentComplete: null,
    });
  });

  test('a run stopped after a batch resumes at its checkpoint: counts and events exactly once', async () => {
    const a = await account();
    const emails = Array.from({ length: 8 }, (_, i) => `r${i}@example.com`);
    const csv = `Email,firstName,Brand\n${emails.map((e) => `${e},R,Alpha`).join('\n')}\n`;
    const id = await stage(a.id, csv, { columns: ['Email', 'firstName', 'Brand'] });
    const crash = (m: string) => {
      if (m === 'import merge batch') throw new Error('worker died');
    };
    expect(await run(a.id, id, { log: crash }).catch((e) => e)).not.toBeInstanceOf(UnrecoverableImportError);
    // Stopped between batches: still importing, the first batch committed (and the second, which
    // was in flight beside it and may have committed too), single writes held.
    const between = await importRow(bed.db.sql, a.id, id);
    expect(between).toMatchObject({ status: 'importing', phase: 'merge' });
    expect(mergeBatchEnds(emails.length, 3).slice(0, 2)).toContain(between.checkpoint);
    expect(between).toMatchObject({
      addedCount: between.checkpoint,
      percentComplete: Math.floor((100 * between.checkpoint) / 8),
    });
    expect((await leftovers(a.id, id)).bulkOperations).toBe(1);
    await run(a.id, id);
    expect(await importRow(bed.db.sql, a.id, id)).toMatchObject({
      status: 'success',
      rowCount: 8,
      addedCount: 8,
      updatedCount: 0,
      skippedCount: 0,
    });
    const [e] = await bed.db.sql<
      { n: number }[]
    >`select count(*)::int as n from brand_subscribe_events, unnest(email_md5s) where import_id = ${id}`;
    expect(e!.n).toBe(8);
    expect(await leftovers(a.id, id)).toEqual({ tables: 0, bulkOperations: 0, object: false });
  });

  test('an object store fault is transient: the import stays importing and the next run completes it', async () => {
    const a = await account();
    const id = await stage(a.id, rows(5));
    let fail = true;
    const flaky: ObjectStore = Object.assign(Object.create(bed.files.store), {
      async read(key: string, etag?: string) {
        if (fail) throw new Error('socket hang up');
        return bed.files.store.read(key, etag);
      },
    });
    expect(await run(a.id, id, { storage: flaky }).catch((e) => e)).toHaveProperty('message', 'socket hang up');
    expect(await importRow(bed.db.sql, a.id, id)).toMatchObject({ status: 'importing', phase: 'read' });
    fail = false;
    await run(a.id, id, { storage: flaky });
    expect(await importRow(bed.db.sql, a.id, id)).toMatchObject({ status: 'success', rowCount: 5, addedCount: 5 });
  });

  test('a second delivery while the import runs elsewhere is refused as busy', async () => {
    const a = await account();
    const id = await stage(a.id, rows(2));
    const other = await bed.db.sql.reserve();
    try {
      await other`select pg_advisory_lock(hashtextextended(${`contact-import:${id}`}, 0))`;
      expect(await run(a.id, id).catch((e) => e)).toBeInstanceOf(ImportBusyError);
      await other`select pg_advisory_unlock(hashtextextended(${`contact-import:${id}`}, 0))`;
    } finally {
      other.release();
    }
    await run(a.id, id);
    expect((await importRow(bed.db.sql, a.id, id)).status).toBe('success');
  });

  test('a finished import is not imported again', async () => {
    const a = await account();
    const { id } = await importCsv(a.id, rows(4));
    const before = await bed.db.sql`select email_md5, updated_at from contacts where account_id = ${a.id} order by 1`;
    await run(a.id, id);
    expect(await bed.db.sql`select email_md5, updated_at from contacts where account_id = ${a.id} order by 1`).toEqual(
      before,
    );
    expect(await importRow(bed.db.sql, a.id, id)).toMatchObject({ status: 'success', addedCount: 4 });
  });
});

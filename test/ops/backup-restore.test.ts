/**
 * Backups (issue 59, item 5; docs/backups.md): a `pg_dump` of a live database restored into a
 * fresh cluster, and the service started on it with the same object store and an empty Redis.
 *
 * Made through the real API before the dump: contacts with brands (their brand-subscribe events),
 * one of them erased, a feed cursor taken mid-set, an export, and four open imports, one per
 * account (an account has one open import at a time): A stopped mid-merge by a killed worker, B
 * uploaded with its job only in Redis (no worker ran), C awaiting its upload, D uploaded but its
 * file missing from the restored object store (a store copied before that upload landed); and E,
 * whose feed a consumer read past the backup point. The dump is taken as the docs say (custom
 * format, unlogged staging tables as empty tables: the state a PostgreSQL crash leaves, which the
 * worker recovers from), restored with pg_restore, and then:
 * everything reads back as it was, A resumes to success with exact counts, B is swept from
 * PostgreSQL and imported, C's link still uploads, D fails with a reason that says the file is
 * gone, the feed continues from the old cursor with no gap and no repeat, E's cursor from after
 * the backup point reads every new event (none placed where the lost ones were), and new writes
 * draw from the restored sequences.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect, type Sql } from '../../src/db';
import { ensureLocalPostgres, type LocalService } from '../../src/embedded';
import { importObjectKey, LocalStore } from '../../src/storage';
import { UploadTokens } from '../../src/storage/upload-token';
import { call, eventually, feedFrom, setNumber, upload, type Answer, type FeedEvent } from '../helpers/backup-client';
import {
  ADVANCE_EVENT_IDS,
  ADVANCE_FEED_POSITIONS,
  analyzeArgs,
  dumpArgs,
  psqlArgs,
  restoreArgs,
  runPgClient,
} from '../helpers/backup-commands';
import { contactsChecksum, faultBed, type Child, type FaultBed } from '../helpers/fault-bed';
import { createAccount, createAttribute, createBrand, createKey } from '../helpers/fixtures';
import { holdIn, WORKER_APP } from '../helpers/pg-faults';
import { sequenceEvents } from '../../worker/events/sequencer';
import { formatCursor, parseCursor } from '../../src/events/cursor';

/** Many merge batches, so the dump lands with some committed and some not. */
const BED_ENV = { IMPORT_BATCH_SIZE: '1000' };
const CONTACTS = 40;
/** Erased before the dump: its events (after the cursor) are hidden on both sides. */
const ERASED_BEFORE = 39;
/** Erased after the restore: its events are before the cursor, so the pages after it stay equal. */
const ERASED_AFTER = 1;

interface Tenant {
  id: string;
  key: string;
}

/** A CSV of `rows` data rows and the counts an import of it must end with (no contact exists yet). */
function importFile(prefix: string, rows: number, withN: boolean) {
  const lines = [withN ? 'Email,n' : 'Email'];
  const valid = new Set<string>();
  let malformed = 0;
  let validRows = 0;
  for (let i = 0; i < rows; i++) {
    // Every 1000th row is not an address; the last tenth repeats earlier addresses (the last one wins).
    if (i % 1000 === 999) {
      lines.push(withN ? `not-an-email-${i},1` : `not-an-email-${i}`);
      malformed++;
      continue;
    }
    const email = `${prefix}${i >= rows * 0.9 ? i - Math.floor(rows * 0.9) : i}@example.com`;
    lines.push(withN ? `${email},${i}` : email);
    valid.add(email);
    validRows++;
  }
  const counts = {
    status: 'success',
    rowCount: valid.size,
    addedCount: valid.size,
    updatedCount: 0,
    skippedCount: 0,
    malformedCount: malformed,
    duplicateInFileCount: validRows - valid.size,
  };
  return { csv: `${lines.join('\n')}\n`, counts };
}

const fileA = importFile('imp', 30_000, true);
const fileB = importFile('b', 2_000, false);
const fileC = importFile('c', 500, false);
const fileD = importFile('d', 100, false);
const email = (i: number) => `Person${i}@Example.com`;
const md5 = (s: string) => new Bun.CryptoHasher('md5').update(s.trim().toLowerCase()).digest('hex');

let bed: FaultBed;
let restored: LocalService | undefined;
let rsql: Sql | undefined;
let api: Child;
let worker: Child | undefined;
const t = {} as Record<'A' | 'B' | 'C' | 'D' | 'E', Tenant>;
const ids = {} as Record<'A' | 'B' | 'C' | 'D' | 'export' | 'brand1' | 'brand2' | 'brandE', string>;
/** What the original service answered just before the dump. */
const before = {} as {
  contacts: Answer[];
  checksum: { count: number; checksum: string };
  imports: Record<'A' | 'B' | 'C' | 'D', any>;
  cursor: string;
  afterCursor: FeedEvent[];
  uploadUrlC: string;
  exportBytes: string;
  /** The last set id the events' identity sequence gave out. */
  eventSeq: number;
  /** E's feed end before the dump, and a cursor past an event written after it (lost with it). */
  cursorE: string;
  lostCursorE: string;
};
/** The same, read from the restored database before the ids were moved on. */
let restoredEventSeq: number;

const lastEventId = async (sql: Sql) => {
  const [r] = await sql<{ v: string }[]>`
    select pg_sequence_last_value(pg_get_serial_sequence('brand_subscribe_events', 'id')::regclass) as v`;
  return Number(r!.v);
};
const timings: Record<string, number> = {};

const get = (who: Tenant, path: string) => call(api.url!, who.key, 'GET', path);
const importOf = async (who: Tenant, id: string) => (await get(who, `/v1/contact-imports/${id}`)).body;

async function tenant(name: string): Promise<Tenant> {
  const id = await createAccount(bed.sql, name);
  return { id, key: await createKey(bed.sql, id) };
}

/** POST /v1/contact-imports and, unless `csv` is undefined, the PUT of its file. */
async function openImport(who: Tenant, columns: string[], csv: string | undefined, extra: object = {}) {
  const made = await call(api.url!, who.key, 'POST', '/v1/contact-imports', {
    columns,
    duplicateContactStrategy: 'overwrite',
    ...extra,
  });
  expect(made.status).toBe(201);
  if (csv !== undefined) expect(await upload(made.body.uploadUrl, csv)).toBe(200);
  return made.body as { id: string; uploadUrl: string };
}

async function untilStatus(who: Tenant, id: string, statuses: string[], ms = 45_000) {
  return eventually(
    `import ${id} ${statuses.join(' or ')}`,
    async () => {
      const it = await importOf(who, id);
      return statuses.includes(it.status) ? it : undefined;
    },
    ms,
  );
}

/** The original service, its data made through the API, and its answers recorded. */
async function makeData(): Promise<void> {
  api = await bed.start('api');
  const firstWorker = await bed.start('worker', { APP_NAME: WORKER_APP });
  for (const n of ['A', 'B', 'C', 'D', 'E'] as const) t[n] = await tenant(`backup ${n}`);
  // E: one event before the dump, and one after it (dumpAndRestore) that the restore loses.
  ids.brandE = await createBrand(bed.sql, t.E.id, 'Brand E');
  expect(
    (await call(api.url!, t.E.key, 'POST', '/v1/contacts', { email: 'e0@example.com', brandIds: [ids.brandE] })).status,
  ).toBe(201);
  ids.brand1 = await createBrand(bed.sql, t.A.id, 'Brand one');
  ids.brand2 = await createBrand(bed.sql, t.A.id, 'Brand two');
  await createAttribute(bed.sql, t.A.id, 'n', 'number');

  // Contacts with one or two brands: one event each brand, 60 in all.
  for (let i = 0; i < CONTACTS; i++) {
    const brandIds = i % 2 === 0 ? [ids.brand1] : [ids.brand1, ids.brand2];
    const made = await call(api.url!, t.A.key, 'POST', '/v1/contacts', {
      email: email(i),
      brandIds,
      attributes: { n: i },
    });
    expect(made.status).toBe(201);
  }
  expect((await call(api.url!, t.A.key, 'DELETE', `/v1/contacts/${md5(email(ERASED_BEFORE))}`)).status).toBe(204);
  const shown = 60 - 2;
  await eventually('every event in the feed', async () => {
    const { events } = await feedFrom(api.url!, t.A.key);
    return events.length === shown ? true : undefined;
  });
  // A cursor in the middle of a set: contacts 0-8 made 13 events, the 14th is the first of contact 9's two.
  const first = await get(t.A, '/v1/events?limit=14');
  expect(first.body.data).toHaveLength(14);
  expect(first.body.data.at(-1).data.email).toBe(email(9));
  before.cursor = first.body.next;

  const exported = await call(api.url!, t.A.key, 'POST', '/v1/contact-exports', {});
  expect(exported.status).toBe(202);
  ids.export = exported.body.id;
  const done = await eventually('the export', async () => {
    const e = (await get(t.A, `/v1/contact-exports/${ids.export}`)).body;
    return e.status === 'success' ? e : undefined;
  });
  before.exportBytes = await (await fetch(done.downloadUrl)).text();
  expect(before.exportBytes).toContain(email(0));

  // A: held mid-merge (some batches committed), then its worker killed.
  const a = await openImport(t.A, ['Email', 'n'], fileA.csv, { brandIds: [ids.brand2] });
  ids.A = a.id;
  const hold = await holdIn(bed, ids.A, t.A.id, 'merge');
  await eventually('the committed batches sequenced', async () => {
    const [r] = await bed.sql<{ n: number }[]>`
      select count(*)::int as n from brand_subscribe_events where account_id = ${t.A.id} and position is null`;
    return r!.n === 0 ? true : undefined;
  });
  await bed.kill(firstWorker);
  await hold.release();
  // B: uploaded while no worker runs; its job is in Redis only. C: a link not used yet. D: uploaded.
  ids.B = (await openImport(t.B, ['Email'], fileB.csv)).id;
  const c = await openImport(t.C, ['Email'], undefined);
  [ids.C, before.uploadUrlC] = [c.id, c.uploadUrl];
  ids.D = (await openImport(t.D, ['Email'], fileD.csv)).id;

  const importA = await importOf(t.A, ids.A);
  expect(importA).toMatchObject({ status: 'importing' });
  const [progress] = await bed.sql<{ phase: string; checkpoint: number; row_count: number }[]>`
    select phase, checkpoint::int, row_count::int from contact_imports where id = ${ids.A}`;
  expect(progress!.phase).toBe('merge');
  expect(progress!.checkpoint).toBeGreaterThan(0);
  expect(progress!.checkpoint).toBeLessThan(progress!.row_count);

  before.contacts = await Promise.all(
    Array.from({ length: CONTACTS }, (_, i) => get(t.A, `/v1/contacts/${md5(email(i))}`)),
  );
  before.checksum = await contactsChecksum(bed.sql, t.A.id);
  before.eventSeq = await lastEventId(bed.sql);
  await sequenceEvents(bed.sql); // E's one set, placed whether or not the killed worker got to it
  const e = await feedFrom(api.url!, t.E.key);
  expect(e.events).toHaveLength(1);
  before.cursorE = e.next;
  before.imports = {
    A: importA,
    B: await importOf(t.B, ids.B),
    C: await importOf(t.C, ids.C),
    D: await importOf(t.D, ids.D),
  };
  expect(before.imports.B.status).toBe('uploaded');
  expect(before.imports.C.status).toBe('awaiting-upload');
  expect(before.imports.D.status).toBe('uploaded');
  before.afterCursor = (await feedFrom(api.url!, t.A.key, before.cursor)).events;
  expect(before.afterCursor.some((e) => e.data.source.importId === ids.A)).toBe(true);
}

/** The dump, the old server gone, Redis emptied, D's file gone, and a fresh cluster restored from the dump. */
async function dumpAndRestore(): Promise<void> {
  const file = join(bed.dataDir, 'contacts.dump');
  timings.dumpMs = (await runPgClient(dumpArgs(bed.databaseUrl, file))).ms;
  // An event after the backup point, read by a consumer: the restore loses it, its cursor stays out there.
  const lost = await call(api.url!, t.E.key, 'POST', '/v1/contacts', {
    email: 'e-lost@example.com',
    brandIds: [ids.brandE],
  });
  expect(lost.status).toBe(201);
  await sequenceEvents(bed.sql); // the worker's sequencer, run here: no worker may run on the old database now
  const read = await feedFrom(api.url!, t.E.key, before.cursorE);
  expect(read.events.map((e) => e.data.email)).toEqual(['e-lost@example.com']);
  before.lostCursorE = read.next;
  await bed.kill(api);
  await bed.stopPostgres();
  await bed.killRedis();
  await bed.startRedis();
  const store = new LocalStore(bed.storeDir, 'http://unused', new UploadTokens(randomBytes(32)));
  await store.remove(importObjectKey(t.D.id, ids.D));

  const fresh = Date.now();
  restored = await ensureLocalPostgres({ dataDir: join(bed.dataDir, 'restored') });
  timings.initdbMs = Date.now() - fresh;
  timings.restoreMs = (await runPgClient(restoreArgs(restored.url, file))).ms;
  timings.analyzeMs = (await runPgClient(analyzeArgs(restored.url))).ms;
  rsql = connect(restored.url, 4);
  restoredEventSeq = await lastEventId(rsql);
  await runPgClient(psqlArgs(restored.url, ADVANCE_EVENT_IDS));
  await runPgClient(psqlArgs(restored.url, ADVANCE_FEED_POSITIONS));
  // The API migrates at start, as in production: the restored migration records must match the files.
  api = await bed.start('api', { DATABASE_URL: restored.url, MIGRATE_ON_START: 'true' });
}

async function startWorker(): Promise<void> {
  worker ??= await bed.start('worker', { DATABASE_URL: restored!.url });
}

/** The restored worker's JSON log lines about one import. */
async function workerSaid(importId: string): Promise<string[]> {
  const lines = (await readFile(worker!.log, 'utf8')).split('\n').filter((l) => l.startsWith('{'));
  return lines
    .map((l) => JSON.parse(l) as { msg: string; importId?: string })
    .filter((l) => l.importId === importId)
    .map((l) => l.msg);
}

beforeAll(async () => {
  bed = await faultBed(BED_ENV);
  const started = Date.now();
  await makeData();
  timings.makeDataMs = Date.now() - started;
  await dumpAndRestore();
}, 80_000);

afterAll(async () => {
  console.log(JSON.stringify({ backupRestore: timings }));
  await rsql?.end({ timeout: 2 }).catch(() => {});
  if (bed) {
    await bed.kill(api).catch(() => {});
    if (worker) await bed.kill(worker).catch(() => {});
  }
  await restored?.stop().catch(() => {});
  await bed?.stop();
});

describe('a pg_dump restored into a fresh cluster, the same object store, an empty Redis', () => {
  test('before any worker runs: contacts, imports and the feed after the old cursor read back as before', async () => {
    const contacts = await Promise.all(
      Array.from({ length: CONTACTS }, (_, i) => get(t.A, `/v1/contacts/${md5(email(i))}`)),
    );
    expect(contacts).toEqual(before.contacts);
    expect(contacts[ERASED_BEFORE]!.status).toBe(404);
    expect(await contactsChecksum(rsql!, t.A.id)).toEqual(before.checksum);
    expect(restoredEventSeq).toBe(before.eventSeq);
    for (const [n, id] of [
      ['A', ids.A],
      ['B', ids.B],
      ['C', ids.C],
      ['D', ids.D],
    ] as const)
      expect(await importOf(t[n], id)).toEqual(before.imports[n]);
    expect((await feedFrom(api.url!, t.A.key, before.cursor)).events).toEqual(before.afterCursor);
    // The merge's hold on the account's single writes came back with the rows: none interleaves with it.
    const write = await call(api.url!, t.A.key, 'POST', '/v1/contacts', { email: 'early@example.com' });
    expect(write.status).toBe(409);
    expect(write.body.code ?? write.body.type).toMatch(/operation_in_progress/);
  });

  test('the import stopped mid-merge resumes from its checkpoint and ends with exact counts', async () => {
    await startWorker();
    const end = await untilStatus(t.A, ids.A, ['success', 'failed'], 60_000);
    expect(end).toMatchObject(fileA.counts);
    const [n] = await rsql!<{ n: number }[]>`
      select count(*)::int as n from contacts where account_id = ${t.A.id} and email like 'imp%'`;
    expect(n!.n).toBe(fileA.counts.addedCount);
    // The way back is the one a PostgreSQL crash takes: the sweep finds the import without a job, the
    // run finds its staging empty (the dump left the unlogged tables' rows out), reads the file
    // again and merges on from the restored checkpoint.
    const said = await workerSaid(ids.A);
    expect(said).toContain('contact import had no live job; enqueued again');
    expect(said).toContain('import staging lost; reading the file again');
  }, 70_000);

  test('the import whose job was only in Redis is swept from PostgreSQL and imported', async () => {
    await startWorker();
    expect(await untilStatus(t.B, ids.B, ['success', 'failed'])).toMatchObject(fileB.counts);
    expect(await workerSaid(ids.B)).toContain('contact import had no live job; enqueued again');
  });

  test('an upload link handed out before the dump uploads to the restored service', async () => {
    await startWorker();
    expect(await upload(before.uploadUrlC, fileC.csv, api.url)).toBe(200);
    expect(await untilStatus(t.C, ids.C, ['success', 'failed'])).toMatchObject(fileC.counts);
  });

  test('an import whose file the object store lost fails and says so', async () => {
    await startWorker();
    const end = await untilStatus(t.D, ids.D, ['success', 'failed']);
    expect(end.status).toBe('failed');
    expect(end.failureReason).toMatch(/uploaded file could not be (found|read)/);
  });

  test('the feed continues from the cursor taken before the dump: no gap, no repeat', async () => {
    await untilStatus(t.A, ids.A, ['success', 'failed'], 60_000);
    // The worker's sequencer places the last batch's events in the feed just after the import ends.
    let { events } = await feedFrom(api.url!, t.A.key, before.cursor);
    for (const end = Date.now() + 30_000; Date.now() < end; await Bun.sleep(200)) {
      if (events.filter((e) => e.data.source.importId === ids.A).length >= fileA.counts.addedCount) break;
      ({ events } = await feedFrom(api.url!, t.A.key, before.cursor));
    }
    expect(events.slice(0, before.afterCursor.length)).toEqual(before.afterCursor);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    // Every contact the import added got brand two once: an event each, those before the dump included.
    const fromImport = events.filter((e) => e.data.source.importId === ids.A);
    expect(fromImport).toHaveLength(fileA.counts.addedCount);
    expect(new Set(fromImport.map((e) => e.data.emailMd5)).size).toBe(fileA.counts.addedCount);
    expect(fromImport.every((e) => e.data.brandId === ids.brand2)).toBe(true);
  }, 70_000);

  test('new writes work and draw from the restored sequences', async () => {
    await untilStatus(t.A, ids.A, ['success', 'failed'], 60_000);
    const { events: old, next } = await feedFrom(api.url!, t.A.key);
    const made = await call(api.url!, t.A.key, 'POST', '/v1/contacts', {
      email: 'after-restore@example.com',
      brandIds: [ids.brand1],
    });
    expect(made.status).toBe(201);
    const fresh = await eventually('the new event in the feed', async () => {
      const { events } = await feedFrom(api.url!, t.A.key, next);
      return events.length > 0 ? events : undefined;
    });
    expect(fresh.map((e) => e.data.email)).toEqual(['after-restore@example.com']);
    // Past every old one, and past the ids the lost sets could have had (ADVANCE_EVENT_IDS).
    expect(setNumber(fresh[0]!)).toBeGreaterThan(Math.max(...old.map(setNumber)));
    expect(setNumber(fresh[0]!)).toBeGreaterThan(before.eventSeq + 1e12);
    // An erasure draws its id from contact_erasures' identity, which the erasure before the dump used.
    expect((await call(api.url!, t.A.key, 'DELETE', `/v1/contacts/${md5(email(ERASED_AFTER))}`)).status).toBe(204);
    expect((await get(t.A, `/v1/contacts/${md5(email(ERASED_AFTER))}`)).status).toBe(404);
    const other = await call(api.url!, t.B.key, 'POST', '/v1/contacts', { email: 'b-new@example.com' });
    expect(other.status).toBe(201);
  }, 70_000);

  test('a cursor from after the backup point reads every new event; one inside a lost set is refused', async () => {
    // E's feed held one set before the backup (position 1) and one after it (2, lost): the consumer
    // holds (3, 0). Restored, new sets are placed past the head moved on by 10^12 (ADVANCE_FEED_POSITIONS).
    const lost = parseCursor(before.lostCursorE);
    expect(lost).toEqual({ position: 3, index: 0 });
    expect((await feedFrom(api.url!, t.E.key, before.lostCursorE)).events).toEqual([]);
    const inside = formatCursor({ position: 2, index: 1 });
    const refused = await get(t.E, `/v1/events?after=${inside}`);
    expect(refused.status).toBe(400);
    expect(refused.body.errors).toEqual([expect.objectContaining({ parameter: 'after' })]);
    for (let i = 0; i < 3; i++) {
      const made = await call(api.url!, t.E.key, 'POST', '/v1/contacts', {
        email: `e-new-${i}@example.com`,
        brandIds: [ids.brandE],
      });
      expect(made.status).toBe(201);
    }
    const fresh = await eventually('the new events in the feed', async () => {
      const { events } = await feedFrom(api.url!, t.E.key, before.cursorE);
      return events.length === 3 ? events : undefined;
    });
    const emails = ['e-new-0@example.com', 'e-new-1@example.com', 'e-new-2@example.com'];
    expect(fresh.map((e) => e.data.email)).toEqual(emails);
    // Where the restored feed once placed its second and third sets, nothing is: the lost cursor skips none.
    expect((await feedFrom(api.url!, t.E.key, before.lostCursorE)).events.map((e) => e.data.email)).toEqual(emails);
    const [head] = await rsql!<{ sequenced_through: string }[]>`
      select sequenced_through::text from event_feed_heads where account_id = ${t.E.id}`;
    expect(Number(head!.sequenced_through)).toBe(1 + 1e12 + 3);
  }, 70_000);

  test('the export made before the dump still downloads, its file unchanged', async () => {
    const e = (await get(t.A, `/v1/contact-exports/${ids.export}`)).body;
    expect(e.status).toBe('success');
    expect(await (await fetch(e.downloadUrl)).text()).toBe(before.exportBytes);
  });
});

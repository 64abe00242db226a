/**
 * What the parity tests (test/contacts/strategy-parity.test.ts, test/schema/value-parity.test.ts) share: one
 * account served in-process by the API, with the real local object store and upload link, and
 * contact imports made the way a client makes them (POST /v1/contact-imports, PUT to the upload
 * link, GET the import) and run by the real pipeline (runImport, as the worker's job does).
 */
import { afterAll, beforeAll, expect } from 'bun:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config';
import type { ImportQueue } from '../../src/imports/queue';
import { createStore } from '../../src/storage';
import type { ObjectStore } from '../../src/storage/store';
import { uploadHandler } from '../../src/uploads';
import { runImport } from '../../worker/import/index';
import { testApp, type TestApp } from './app';
import { testConfig } from './file-store';

export interface ParityBed {
  t: TestApp;
  storage: ObjectStore;
  /** The upload link's handler (PUT /uploads/<token>). */
  put: (request: Request) => Promise<Response>;
}

/** Imports are run by the test itself; the queue only has to accept them. */
const queue: ImportQueue = {
  enqueueImport: async () => {},
  ensureImport: async () => 'live',
  ping: async () => 'PONG',
  close: async () => {},
};

/** Registers the bed's set-up and removal; read its fields inside tests and hooks. */
export function parityBed(): ParityBed {
  const bed = {} as ParityBed;
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'parity-'));
    const env = { DATA_DIR: dir, STORAGE_DIR: join(dir, 'objects'), PUBLIC_URL: 'http://api.test' };
    bed.storage = await createStore(loadConfig(env));
    bed.t = await testApp({ storage: bed.storage, queue }, env);
    bed.put = uploadHandler(bed.t.deps);
  });
  afterAll(async () => {
    await bed.t?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  return bed;
}

export interface ImportRequest {
  columns: string[];
  duplicateContactStrategy: 'overwrite' | 'keep' | 'skip';
  overwriteBrands?: boolean;
  restoreDisabled?: boolean;
}

/**
 * One contact import of `csv` from start to end: created through the API, the file PUT to its
 * upload link, run by the pipeline with merge batches of `batchSize` rows. Returns the import as
 * GET /v1/contact-imports/{id} shows it at the end (asserted `success`, unless `expectFailure`).
 */
export async function importThrough(
  bed: ParityBed,
  request: ImportRequest,
  csv: string | Uint8Array,
  batchSize: number,
  expectFailure = false,
): Promise<any> {
  const { t } = bed;
  const created = await t.call('POST', '/v1/contact-imports', { body: request });
  expect(created.status).toBe(201);
  const uploaded = await bed.put(new Request(created.body.uploadUrl, { method: 'PUT', body: csv }));
  expect(uploaded.status).toBe(200);
  const deps = { sql: t.db.sql, storage: bed.storage, config: testConfig(batchSize) };
  const run = runImport(deps, t.accountId, created.body.id);
  if (expectFailure) await run.catch(() => {});
  else await run;
  const got = await t.call('GET', `/v1/contact-imports/${created.body.id}`);
  expect(got.status).toBe(200);
  expect(got.body.status).toBe(expectFailure ? 'failed' : 'success');
  return got.body;
}

/** One CSV line, every field quoted (so spaces, commas, quotes and newlines in a cell survive as written). */
export function csvLine(cells: readonly string[]): string {
  return cells.map((c) => `"${c.replaceAll('"', '""')}"`).join(',');
}

export interface StoredContact {
  attributes: Record<string, unknown>;
  brandIds: string[];
  enabled: boolean;
  updatedAt: Date;
}

/** The stored contacts of the account by lowercased email, read in one statement. */
export async function storedContacts(bed: ParityBed, emails: readonly string[]): Promise<Map<string, StoredContact>> {
  const { sql, accountId } = { sql: bed.t.db.sql, accountId: bed.t.accountId };
  const rows = await sql<(StoredContact & { email: string })[]>`
    select lower(email) as email, attributes, brand_ids::text[] as "brandIds", enabled, updated_at as "updatedAt"
    from contacts
    where account_id = ${accountId}
      and email_md5 = any(select md5(lower(e))::uuid from unnest(${sql.array([...emails])}::text[]) as e)`;
  return new Map(rows.map(({ email, ...c }) => [email, c]));
}

export interface SubscribeEvent {
  brandId: string;
  source: string;
  importId: string | null;
}

/** The brand-subscribe events of the account by the lowercased email of their contact. */
export async function subscribeEvents(
  bed: ParityBed,
  emails: readonly string[],
): Promise<Map<string, SubscribeEvent[]>> {
  const { sql, accountId } = { sql: bed.t.db.sql, accountId: bed.t.accountId };
  const rows = await sql<(SubscribeEvent & { email: string })[]>`
    select x.e as email, ev.brand_id::text as "brandId", ev.source, ev.import_id::text as "importId"
    from unnest(${sql.array([...emails])}::text[]) as x(e)
    join brand_subscribe_events ev
      on ev.account_id = ${accountId} and md5(lower(x.e))::uuid = any(ev.email_md5s)
    order by ev.id`;
  const out = new Map<string, SubscribeEvent[]>();
  for (const { email, ...e } of rows) out.set(email.toLowerCase(), [...(out.get(email.toLowerCase()) ?? []), e]);
  return out;
}

/**
 * Imports give a busy API room (src/imports/api-load.ts, worker/import/pace.ts): an API process
 * that serves at least IMPORT_YIELD_RPS sets a key in Redis, the worker reads it, and while it is
 * set the read rests after each parsed chunk, the dedupe runs its parts' statements one at a time
 * with rests, and each merge batch runs in paced pieces inside its one transaction. Real Redis,
 * real PostgreSQL; each test uses a key of its own, so parallel test files are not paced.
 */
import { describe, expect, test } from 'bun:test';
import IORedis from 'ioredis';
import { ApiLoad, ApiLoadSignal } from '../../src/imports/api-load';
import { importDedupeRest, importMergeRest, importReadRest } from '../../src/metrics/import-pipeline';
import { runImport } from '../../worker/import/index';
import { PACED_ROWS, UNPACED_ROWS } from '../../worker/import/merge/batch';
import { importBed } from '../helpers/import-bed';
import { stageImport, testConfig } from '../helpers/file-store';
import { createAccount, createAttribute } from '../helpers/fixtures';
import { testServices } from '../helpers/services';

const bed = importBed();
const key = () => `test:api-busy:${crypto.randomUUID()}`;

async function until(check: () => boolean | Promise<boolean>, ms = 3_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await Bun.sleep(25);
  }
  return check();
}

describe('the busy signal through Redis', () => {
  test('the API sets the key at its threshold, not below it, and the worker reads it', async () => {
    const { redisUrl } = await testServices();
    const redis = new IORedis(redisUrl);
    const [quiet, busy] = [key(), key()];
    // 40 requests a second is 10 a window of 250 ms.
    const below = new ApiLoadSignal(redisUrl, 40, quiet);
    const above = new ApiLoadSignal(redisUrl, 40, busy);
    const reader = new ApiLoad(redisUrl, busy);
    try {
      const hits = setInterval(() => {
        // 240 and 20 requests a second.
        for (let i = 0; i < 12; i++) above.hit();
        below.hit();
      }, 50);
      try {
        expect(await until(async () => (await redis.exists(busy)) === 1)).toBe(true);
        expect(await until(() => reader.busy())).toBe(true);
        expect(await redis.exists(quiet)).toBe(0);
      } finally {
        clearInterval(hits);
      }
      // The key lapses about a second after the load stops, and the reader follows.
      expect(await until(async () => (await redis.exists(busy)) === 0)).toBe(true);
      expect(await until(() => !reader.busy())).toBe(true);
    } finally {
      await Promise.all([below.close(), above.close(), reader.close()]);
      redis.disconnect();
    }
  });

  test('IMPORT_YIELD_RPS=0 never sets it; a Redis that is not there reads as not busy', async () => {
    const { redisUrl } = await testServices();
    const redis = new IORedis(redisUrl);
    const k = key();
    const off = new ApiLoadSignal(redisUrl, 0, k);
    const nowhere = new ApiLoad('redis://127.0.0.1:9', k);
    try {
      for (let i = 0; i < 10_000; i++) off.hit();
      await Bun.sleep(600);
      expect(await redis.exists(k)).toBe(0);
      expect(nowhere.busy()).toBe(false);
    } finally {
      await Promise.all([off.close(), nowhere.close()]);
      redis.disconnect();
    }
  });
});

describe('an import while the API is busy', () => {
  const ROWS = 2 * PACED_ROWS + 1_234;

  async function imported(
    busy: () => boolean,
    pace: number,
    rows = ROWS,
    phases: readonly string[] = ['read', 'dedupe', 'merge'],
  ) {
    const accountId = await createAccount(bed.db.sql);
    await createAttribute(bed.db.sql, accountId, 'firstName', 'string');
    // A third of the addresses exist already: the batch takes the merge path as well as the insert one.
    await bed.db.sql`
      insert into contacts (account_id, email_md5, email, attributes, first_source)
      select ${accountId}, md5('p' || n || '@example.com')::uuid, 'p' || n || '@example.com',
             '{"firstName":"Old"}', 'api'
      from generate_series(0, ${rows - 1}, 3) n`;
    const csv = `Email,firstName\n${Array.from({ length: rows }, (_, i) => `p${i}@example.com,New${i}`).join('\n')}\n`;
    const id = await stageImport(bed.db.sql, bed.files.store, accountId, csv, {
      columns: ['email', 'firstName'],
      strategy: 'overwrite',
    });
    const logs: { msg: string; fields: Record<string, unknown> }[] = [];
    const config = { ...testConfig(rows), importPace: pace };
    const log = (msg: string, fields?: object) => logs.push({ msg, fields: (fields ?? {}) as Record<string, unknown> });
    // `phases`: which phases see `busy`; the others see an idle API.
    const phaseOf = () =>
      logs.some((l) => l.msg === 'import deduplicated')
        ? 'merge'
        : logs.some((l) => l.msg === 'import read')
          ? 'dedupe'
          : 'read';
    const apiBusy = () => phases.includes(phaseOf()) && busy();
    const started = performance.now();
    await runImport({ sql: bed.db.sql, storage: bed.files.store, config, log, apiBusy }, accountId, id);
    const ms = performance.now() - started;
    const [state] = await bed.db.sql<{ status: string; added: number; updated: number }[]>`
      select status, added_count as added, updated_count as updated from contact_imports where id = ${id}`;
    const [contacts] = await bed.db.sql<{ n: number; fresh: number }[]>`
      select count(*)::int as n,
             count(*) filter (
               where attributes->>'firstName' = 'New' || substr(split_part(email, '@', 1), 2)
             )::int as fresh
      from contacts where account_id = ${accountId}`;
    const batches = logs.filter((l) => l.msg === 'import merge batch').map((l) => l.fields);
    const read = logs.find((l) => l.msg === 'import read')!.fields;
    const dedupe = logs.find((l) => l.msg === 'import deduplicated')!.fields;
    return { state, contacts, batches, read, dedupe, ms };
  }

  test('busy: the read rests after its chunks, the dedupe runs its parts one at a time with rests', async () => {
    const value = async (c: typeof importReadRest) => (await c.get()).values[0]?.value ?? 0;
    const [readBefore, dedupeBefore] = [await value(importReadRest), await value(importDedupeRest)];
    const { state, contacts, read, dedupe } = await imported(() => true, 1);
    expect(state?.status).toBe('success');
    expect(contacts).toEqual({ n: ROWS, fresh: ROWS });
    expect(read).toMatchObject({ rows: ROWS, staged: ROWS });
    expect(read.pacedPieces as number).toBeGreaterThanOrEqual(1);
    expect(read.restedMs as number).toBeGreaterThan(0);
    // Two parts, each one slice's sort and its key: four statements, each a piece.
    expect(dedupe).toMatchObject({ rowCount: ROWS, pacedPieces: 4 });
    expect(dedupe.restedMs as number).toBeGreaterThan(0);
    // The metrics count the rests of committed phases (other files' imports run in other processes).
    expect((await value(importReadRest)) - readBefore).toBeCloseTo((read.restedMs as number) / 1000, 3);
    expect((await value(importDedupeRest)) - dedupeBefore).toBeCloseTo((dedupe.restedMs as number) / 1000, 3);
  });

  test('busy: one batch, one transaction, in pieces of PACED_ROWS with rests; every row merged', async () => {
    const restedBefore = (await importMergeRest.get()).values[0]?.value ?? 0;
    const { state, contacts, batches } = await imported(() => true, 1, ROWS, ['merge']);
    const existing = Math.ceil(ROWS / 3);
    expect(state).toEqual({ status: 'success', added: ROWS - existing, updated: existing });
    expect(contacts).toEqual({ n: ROWS, fresh: ROWS });
    expect(batches).toHaveLength(1);
    // The merge table's two parts split the batch once more: three or four pieces.
    expect(batches[0]).toMatchObject({ checkpoint: ROWS });
    expect(batches[0]!.pacedPieces).toBeOneOf([3, 4]);
    expect(batches[0]!.restedMs).toBeGreaterThan(0);
    // The metric counts the rests of committed batches (other files' imports run in other processes).
    const rested = ((await importMergeRest.get()).values[0]?.value ?? 0) - restedBefore;
    expect(rested).toBeCloseTo((batches[0]!.restedMs as number) / 1000, 3);
  });

  test('not busy, or IMPORT_PACE=0: nothing rests, the batch runs whole', async () => {
    for (const [busy, pace] of [
      [() => false, 4],
      [() => true, 0],
    ] as const) {
      const { state, contacts, batches, read, dedupe } = await imported(busy, pace);
      expect(state?.status).toBe('success');
      expect(contacts).toEqual({ n: ROWS, fresh: ROWS });
      expect(batches).toHaveLength(1);
      expect(batches[0]!.pacedPieces).toBeUndefined();
      expect(read.pacedPieces).toBeUndefined();
      expect(dedupe.pacedPieces).toBeUndefined();
    }
  });

  test('the API turning busy during a batch paces what is left of it', async () => {
    let asked = 0;
    // Not busy when the batch's first part is asked about, busy from then on: that part goes
    // whole, the second (about half the rows) in pieces.
    const { contacts, batches } = await imported(() => ++asked > 1, 1, ROWS, ['merge']);
    expect(contacts).toEqual({ n: ROWS, fresh: ROWS });
    expect(batches).toHaveLength(1);
    expect(batches[0]!.pacedPieces).toBeOneOf([1, 2]);
    expect(asked).toBe(1 + (batches[0]!.pacedPieces as number));
  });

  test('a batch goes in pieces of UNPACED_ROWS when not busy: a load that starts waits one piece', async () => {
    const rows = 2 * UNPACED_ROWS + 4 * PACED_ROWS;
    let asked = 0;
    // Not busy when the first piece is asked about, busy from then on: every row after the first
    // UNPACED_ROWS is merged in paced pieces, not just those of the batch's second part.
    const { contacts, batches } = await imported(() => ++asked > 1, 1, rows, ['merge']);
    expect(contacts).toEqual({ n: rows, fresh: rows });
    expect(batches).toHaveLength(1);
    const paced = batches[0]!.pacedPieces as number;
    // The part boundary may cut one piece short.
    expect(paced).toBeOneOf([(rows - UNPACED_ROWS) / PACED_ROWS, (rows - UNPACED_ROWS) / PACED_ROWS + 1]);
    expect(asked).toBe(1 + paced);
  });
});

/**
 * Issue 39: a database fault during an import's read must not leave the object's file open. Under a
 * chaos soak a read whose COPY connection died never settled, its FileHandle stayed open, and when
 * the GC found it Bun threw an uncaughtException (the worker exits on those).
 *
 * The fault is landed where it hurt: a COPY statement's data all sent (CopyDone) and the server not
 * yet answering. A statement-level trigger, added by an event trigger to each staging rows table
 * the read makes, waits on an advisory lock the test holds; the backend waiting there is
 * terminated. The import must resume and end like an uninterrupted run, with no descriptor left
 * open under the store's directory and nothing uncaught after a full GC.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readdirSync, readlinkSync } from 'node:fs';
import { connect, type Sql } from '../../src/db';
import { runImport, UnrecoverableImportError } from '../../worker/import/index';
import { importBed } from '../helpers/import-bed';
import { importRow, stageImport, testConfig } from '../helpers/file-store';
import { createAccount, createAttribute } from '../helpers/fixtures';

/**
 * ~2.9 MB: more than the read takes ahead of a COPY that hangs (the sink's 1M characters and the
 * streams' buffers), so the read is paused mid-file with the file open, as in the soak.
 */
const ROWS = 100_000;
const BATCH = 1_000;
const HOLD_KEY = 3_900_039;

const bed = importBed();
/** The import's own pool, apart from the test's polling, as the worker's is from the test's. */
let importSql: Sql;
const uncaught: unknown[] = [];
const onUncaught = (e: unknown) => uncaught.push(e);

beforeAll(async () => {
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUncaught);
  importSql = connect(bed.db.url, 4);
  await bed.db.sql.unsafe(`
    create function hold_copy() returns trigger language plpgsql as $$
    begin
      perform pg_advisory_xact_lock_shared(${HOLD_KEY});
      return null;
    end $$;
    create function add_hold_copy() returns event_trigger language plpgsql as $$
    declare t record;
    begin
      for t in select object_identity from pg_event_trigger_ddl_commands()
               where command_tag = 'CREATE TABLE' and object_identity ~ '\\.import_rows_[0-9a-f]{32}$'
      loop
        execute format('create trigger hold_copy after insert on %s for each statement execute function hold_copy()',
                       t.object_identity);
      end loop;
    end $$;
    create event trigger add_hold_copy on ddl_command_end execute function add_hold_copy();`);
});

afterAll(async () => {
  await importSql?.end({ timeout: 2 });
  process.off('uncaughtException', onUncaught);
  process.off('unhandledRejection', onUncaught);
});

function csv(): string {
  const lines = ['Email,n'];
  for (let i = 0; i < ROWS; i++) lines.push(`user${i}@example.com,${i}`);
  return `${lines.join('\n')}\n`;
}

/** The file with a byte that is no UTF-8 near its end: the import fails there, after its first COPYs. */
function brokenNearEnd(): Uint8Array {
  const bytes = Buffer.from(csv());
  bytes[bytes.length - 20] = 0xff;
  return bytes;
}

/** Descriptors of this process that point to the import's object in the store. */
function openObjectFiles(importId: string): string[] {
  const open: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(bed.files.dir) && target.includes(importId)) open.push(`${fd} -> ${target}`);
    } catch {
      // closed since the listing
    }
  }
  return open;
}

async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await check();
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await Bun.sleep(20);
  }
}

/** The run's end, or 'hung' when it has not settled within `ms`. */
function settled(run: Promise<unknown>, ms: number): Promise<unknown> {
  return Promise.race([
    run.then(
      (v) => v,
      (e: unknown) => e,
    ),
    Bun.sleep(ms).then(() => 'hung'),
  ]);
}

async function staged(content: string | Uint8Array): Promise<{ accountId: string; importId: string }> {
  const accountId = await createAccount(bed.db.sql);
  await createAttribute(bed.db.sql, accountId, 'n', 'number');
  const importId = await stageImport(bed.db.sql, bed.files.store, accountId, content, { columns: ['Email', 'n'] });
  return { accountId, importId };
}

function run(accountId: string, importId: string): Promise<unknown> {
  return runImport({ sql: importSql, storage: bed.files.store, config: testConfig(BATCH) }, accountId, importId);
}

/** After the run settled: nothing of the store open, and a full GC finds no FileHandle to complain of. */
async function expectNothingLeft(importId: string): Promise<void> {
  await Bun.sleep(100); // a destroyed stream closes its file asynchronously
  expect(openObjectFiles(importId)).toEqual([]);
  Bun.gc(true);
  await Bun.sleep(100);
  Bun.gc(true);
  await Bun.sleep(100);
  expect(uncaught.map(String)).toEqual([]);
}

/**
 * Runs the import with the hold taken, terminates the COPY backend once it waits on the hold (past
 * CopyDone, before CommandComplete), then lets go of the hold.
 */
async function killedAtStatementEnd(content: string | Uint8Array): Promise<void> {
  const { accountId, importId } = await staged(content);
  const hold = await bed.db.sql.reserve();
  let held = true;
  try {
    await hold`select pg_advisory_lock(${HOLD_KEY})`;
    const running = run(accountId, importId);
    const pid = await until('the COPY waiting on the hold', async () => {
      const [w] = await bed.db.sql<{ pid: number }[]>`
        select pid from pg_stat_activity
        where datname = current_database() and wait_event = 'advisory' and ltrim(query, E' \\n') ilike 'copy %'`;
      return w?.pid;
    });
    await bed.db.sql`select pg_terminate_backend(${pid})`;
    await until('the COPY backend gone', async () => {
      const [g] = await bed.db.sql`select 1 from pg_stat_activity where pid = ${pid}`;
      return g ? undefined : true;
    });
    await hold`select pg_advisory_unlock(${HOLD_KEY})`;
    held = false;
    const end = await settled(running, 30_000);
    await expectNothingLeft(importId);
    expect(end).toBe('ended');
    const row = await importRow(bed.db.sql, accountId, importId);
    expect(row).toMatchObject({ status: 'success', rowCount: ROWS, addedCount: ROWS, malformedCount: 0 });
  } finally {
    if (held) await hold`select pg_advisory_unlock(${HOLD_KEY})`.catch(() => {});
    hold.release();
  }
}

describe('an import read leaves no file of the store open', () => {
  test(
    'its COPY connection killed as a statement ends: the read resumes, the file is closed',
    () => killedAtStatementEnd(csv()),
    60_000,
  );

  test(
    'the same with a gzip file (the gunzip stage between)',
    () => killedAtStatementEnd(Bun.gzipSync(Buffer.from(csv()))),
    60_000,
  );

  test('a file found broken after rows were copied: the import fails, the file is closed', async () => {
    const { accountId, importId } = await staged(brokenNearEnd());
    const end = await settled(run(accountId, importId), 30_000);
    await expectNothingLeft(importId);
    expect(end).toBeInstanceOf(UnrecoverableImportError);
    expect((await importRow(bed.db.sql, accountId, importId)).status).toBe('failed');
  }, 60_000);

  test('an uninterrupted import: the file is closed', async () => {
    const { accountId, importId } = await staged(csv());
    expect(await settled(run(accountId, importId), 30_000)).toBe('ended');
    await expectNothingLeft(importId);
  }, 60_000);
});

/**
 * Crash safety of the import pipeline: a worker process SIGKILLed during the read phase and again
 * during the merge phase, then restarted, ends with exactly what an uninterrupted run gives (same
 * counts, same contacts, same events), checked against an import of the same file into a second
 * account set up the same way.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Sql } from '../../src/db';
import { importBed } from '../helpers/import-bed';
import { importRow, stageImport } from '../helpers/file-store';
import { createAccount, createAttribute, createBrand } from '../helpers/fixtures';

const ROWS = 300_000;
const BATCH = 5_000;

const bed = importBed();
let logs: string;

beforeAll(async () => {
  logs = await mkdtemp(join(tmpdir(), 'import-crash-'));
});
afterAll(async () => {
  await rm(logs, { recursive: true, force: true });
});

/** Deterministic file: repeats (last wins), malformed rows, brands, existing and disabled contacts, a seed. */
function csv(): string {
  const lines = ['Email,firstName,score,tags,Brand'];
  for (let i = 0; i < ROWS; i++) {
    const n = i % 240_000; // the last 60,000 rows repeat earlier addresses
    if (i % 997 === 0) lines.push(`broken-${i},x,1,,`);
    else
      lines.push(
        `user${n}@example.com,Name ${i},${i % 100},a;b${i % 7},` +
          `${i % 3 === 0 ? 'alpha' : i % 3 === 1 ? 'Beta;alpha' : ''}`,
      );
  }
  return `${lines.join('\r\n')}\r\n`;
}

async function account(sql: Sql): Promise<string> {
  const id = await createAccount(sql);
  await createAttribute(sql, id, 'firstName', 'string');
  await createAttribute(sql, id, 'score', 'number');
  await createAttribute(sql, id, 'tags', 'array');
  const alpha = await createBrand(sql, id, 'Alpha');
  await createBrand(sql, id, 'Beta');
  await sql`
    insert into contacts (account_id, email_md5, email, attributes, brand_ids, enabled, first_source)
    select ${id}, md5('user' || n || '@example.com')::uuid, 'user' || n || '@example.com',
           jsonb_build_object('firstName', 'Old', 'score', n), array[${alpha}::uuid], n % 2 = 0, 'api'
    from generate_series(0, 20000, 10) n`;
  await sql`
    insert into seed_addresses (account_id, email_md5, email)
    values (${id}, md5('user5@example.com')::uuid, 'user5@example.com')`;
  // A seed inserted by hand moves the account's seeds counter (sql/migrations/0018).
  await sql`select seeds_changed(${id}::uuid)`;
  return id;
}

function spawnImport(accountId: string, importId: string, name: string) {
  return Bun.spawn(
    [
      process.execPath,
      join(import.meta.dir, '../helpers/run-import.ts'),
      bed.db.url,
      bed.files.dir,
      accountId,
      importId,
      String(BATCH),
    ],
    {
      stdout: Bun.file(join(logs, `${name}.out`)),
      stderr: Bun.file(join(logs, `${name}.err`)),
    },
  );
}

async function until(what: string, check: () => Promise<boolean>, ms = 120_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
}

async function stagedRows(importId: string): Promise<number> {
  try {
    const [r] = await bed.db.sql.unsafe<{ n: number }[]>(
      `select count(*)::int as n from import_rows_${importId.replaceAll('-', '')}`,
    );
    return r!.n;
  } catch {
    return 0; // not created yet
  }
}

/** Everything an import leaves behind, with brand ids as names so two accounts compare. */
async function outcome(accountId: string, importId: string) {
  const row = await importRow(bed.db.sql, accountId, importId);
  const [digest] = await bed.db.sql<{ contacts: string; n: number; events: string; e: number }[]>`
    select
      (select md5(string_agg(concat_ws('|', c.email_md5, c.email, c.attributes::text, c.enabled, c.first_source,
                                       (select string_agg(b.name, ',' order by x.n)
                                        from unnest(c.brand_ids) with ordinality x(id, n)
                                        join brands b on b.account_id = c.account_id and b.id = x.id)),
                             '/' order by c.email_md5))
       from contacts c where c.account_id = ${accountId}) as contacts,
      (select count(*)::int from contacts where account_id = ${accountId}) as n,
      (select md5(string_agg(m.email_md5::text || b.name, '/' order by m.email_md5, b.name))
       from brand_subscribe_events e cross join lateral unnest(e.email_md5s) as m(email_md5)
       join brands b on b.account_id = e.account_id and b.id = e.brand_id
       where e.account_id = ${accountId}) as events,
      (select count(*)::int from brand_subscribe_events, unnest(email_md5s) where account_id = ${accountId}) as e`;
  const {
    status,
    rowCount,
    addedCount,
    updatedCount,
    skippedCount,
    malformedCount,
    duplicateInFileCount,
    percentComplete,
  } = row;
  return {
    status,
    rowCount,
    addedCount,
    updatedCount,
    skippedCount,
    malformedCount,
    duplicateInFileCount,
    percentComplete,
    ...digest,
  };
}

test('a worker killed during read and during merge finishes exactly like an uninterrupted one', async () => {
  const file = csv();
  const [crashed, reference] = [await account(bed.db.sql), await account(bed.db.sql)];
  const options = {
    columns: ['Email', 'firstName', 'score', 'tags', 'Brand'],
    strategy: 'overwrite' as const,
    restoreDisabled: true,
  };
  const crashId = await stageImport(bed.db.sql, bed.files.store, crashed, file, options);
  const refId = await stageImport(bed.db.sql, bed.files.store, reference, file, options);

  // 1. Killed while COPYing into staging.
  let child = spawnImport(crashed, crashId, 'run1');
  await until('rows staged', async () => (await stagedRows(crashId)) > 0);
  child.kill('SIGKILL');
  await child.exited;
  expect(await importRow(bed.db.sql, crashed, crashId)).toMatchObject({ status: 'importing', phase: 'read' });
  expect(await stagedRows(crashId)).toBeLessThan(ROWS);

  // 2. Killed between or inside merge batches.
  child = spawnImport(crashed, crashId, 'run2');
  await until('merge under way', async () => {
    const r = await importRow(bed.db.sql, crashed, crashId);
    return r.phase === 'merge' && r.checkpoint > 0;
  });
  child.kill('SIGKILL');
  await child.exited;
  const midway = await importRow(bed.db.sql, crashed, crashId);
  expect(midway).toMatchObject({ status: 'importing', phase: 'merge' });
  expect(midway.checkpoint).toBeLessThan(midway.rowCount!);

  // 3. Restarted: runs to the end.
  child = spawnImport(crashed, crashId, 'run3');
  const code = await child.exited;
  if (code !== 0) console.error(await readFile(join(logs, 'run3.err'), 'utf8'));
  expect(code).toBe(0);

  const ref = spawnImport(reference, refId, 'reference');
  expect(await ref.exited).toBe(0);

  const a = await outcome(crashed, crashId);
  const b = await outcome(reference, refId);
  expect(a).toEqual(b);
  expect(a).toMatchObject({ status: 'success', percentComplete: null, malformedCount: Math.ceil(ROWS / 997) });
  expect(a.addedCount + a.updatedCount! + a.skippedCount!).toBe(a.rowCount!);
  expect(a.rowCount! + a.duplicateInFileCount! + a.malformedCount).toBe(ROWS);
}, 600_000);

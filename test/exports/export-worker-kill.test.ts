/**
 * A worker SIGKILLed in the middle of a contact export of 1,000,000 contacts (issue 37, "Must show"):
 * the export's lease lapses, another worker takes it over, starts the file again from scratch, and the
 * export ends `success` with exactly one complete file of 1M rows (the dead run's half file gone).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { LocalStore } from '../../src/storage/local';
import { UploadTokens } from '../../src/storage/upload-token';
import { faultBed, type FaultBed } from '../helpers/fault-bed';
import { until } from '../helpers/fault-import';
import { createAccount, createAttribute } from '../helpers/fixtures';

const ROWS = 1_000_000;
let bed: FaultBed;
let accountId: string;

beforeAll(async () => {
  bed = await faultBed();
  accountId = await createAccount(bed.sql, 'export-kill');
  await createAttribute(bed.sql, accountId, 'firstName', 'string');
  await createAttribute(bed.sql, accountId, 'score', 'number');
  await createAttribute(bed.sql, accountId, 'tags', 'array');
  // One statement, no import: the contacts as an import would have stored them.
  await bed.sql`
    insert into contacts (account_id, email_md5, email, attributes, first_source)
    select ${accountId}, md5('user' || i || '@example.com')::uuid, 'user' || i || '@example.com',
      jsonb_build_object('firstName', 'Name ' || i, 'score', i % 1000, 'tags', jsonb_build_array('a', 'b;' || i % 7)),
      'import'
    from generate_series(1, ${ROWS}) i`;
}, 120_000);

afterAll(async () => {
  await bed?.stop();
});

/** The export's COPY is running on the server: the run is streaming its file. */
async function copyRunning(): Promise<boolean> {
  const rows = await bed.sql`
    select 1 from pg_stat_activity where state = 'active' and query like 'copy (select %contacts c%'`;
  return rows.length > 0;
}

test('a worker killed mid-export: another takes it over; the export ends with one whole file of 1M rows', async () => {
  const [created] = await bed.sql<{ id: string }[]>`
    insert into contact_exports (account_id, status, columns, compression)
    values (${accountId}, 'queued', ${bed.sql.array(['Email', 'Brand', 'firstName', 'score', 'tags'])}, 'none')
    returning id`;
  const exportId = created!.id;
  const first = await bed.start('worker', { APP_NAME: 'export-worker-a' });
  await until('the COPY to run', async () => (await copyRunning()) || undefined, 30_000);
  await Bun.sleep(300);
  await bed.kill(first);
  const [mid] = await bed.sql<{ status: string; attempts: number }[]>`
    select status, attempts from contact_exports where account_id = ${accountId} and id = ${exportId}`;
  expect(mid).toEqual({ status: 'exporting', attempts: 1 });

  const killedAt = Date.now();
  await bed.start('worker', { APP_NAME: 'export-worker-b' });
  const done = await until(
    'the export to end',
    async () => {
      const [r] = await bed.sql<
        { status: string; attempts: number; row_count: string | null; object_key: string | null }[]
      >`select status, attempts, row_count, object_key from contact_exports
        where account_id = ${accountId} and id = ${exportId}`;
      return r?.status === 'success' || r?.status === 'failed' ? r : undefined;
    },
    60_000,
  );
  console.log(JSON.stringify({ fault: 'export worker kill -9', recoveredMs: Date.now() - killedAt }));
  expect(done.status).toBe('success');
  expect(done.attempts).toBe(2);
  expect(Number(done.row_count)).toBe(ROWS);

  // One file: the second run's; the killed run's half-written one is gone.
  const dir = join(bed.storeDir, 'contact-exports', accountId, exportId);
  expect((await readdir(dir)).sort()).toEqual(['2.csv', '2.csv.v']);
  const store = new LocalStore(bed.storeDir, 'http://localhost:0', new UploadTokens(Buffer.alloc(32)));
  const lines = createInterface({ input: await store.read(done.object_key!), crlfDelay: Infinity });
  let header: string | undefined;
  let rows = 0;
  const emails = new Set<string>();
  for await (const line of lines) {
    if (header === undefined) {
      header = line;
      continue;
    }
    rows++;
    emails.add(line.slice(0, line.indexOf(',')));
  }
  expect(header).toBe('Email,Brand,firstName,score,tags');
  expect(rows).toBe(ROWS);
  expect(emails.size).toBe(ROWS);
  expect(emails.has('user1@example.com') && emails.has(`user${ROWS}@example.com`)).toBe(true);
}, 120_000);

test('its connection cut thrice, then PostgreSQL restarted, mid-export: the outages are waited out', async () => {
  const [created] = await bed.sql<{ id: string }[]>`
    insert into contact_exports (account_id, status, columns, compression)
    values (${accountId}, 'queued', ${bed.sql.array(['Email', 'score'])}, 'gzip')
    returning id`;
  const exportId = created!.id;
  const worker = await bed.start('worker', { APP_NAME: 'export-worker-pg' });
  try {
    // MAX_ATTEMPTS (3) runs broken by a cut connection, each failing while the database answers:
    // counted against the export, they would have failed it. Then a restart of the server.
    const runNumber = async () => {
      const [r] = await bed.sql<{ attempts: number }[]>`
        select attempts from contact_exports where account_id = ${accountId} and id = ${exportId}`;
      return r!.attempts;
    };
    /** Run `n` is streaming: its COPY is on the server (not the last run's, still being cut). */
    const streaming = (n: number) =>
      until(`run ${n}'s COPY`, async () => (await runNumber()) === n && (await copyRunning()), 60_000);
    for (let cut = 1; cut <= 3; cut++) {
      await streaming(cut);
      await bed.sql`
        select pg_terminate_backend(pid) from pg_stat_activity
        where state = 'active' and query like 'copy (select %contacts c%'`;
    }
    await streaming(4);
    await bed.restartPostgres();
    const done = await until(
      'the export to end',
      async () => {
        const [r] = await bed.sql<{ status: string; attempts: number; row_count: string | null }[]>`
          select status, attempts, row_count from contact_exports where account_id = ${accountId} and id = ${exportId}`;
        return r?.status === 'success' || r?.status === 'failed' ? r : undefined;
      },
      90_000,
    );
    expect(done).toMatchObject({ status: 'success', attempts: 5 });
    expect(Number(done.row_count)).toBe(ROWS);
    const dir = join(bed.storeDir, 'contact-exports', accountId, exportId);
    expect((await readdir(dir)).sort()).toEqual(['5.csv.gz', '5.csv.gz.v']);
  } finally {
    await bed.kill(worker);
  }
}, 240_000);

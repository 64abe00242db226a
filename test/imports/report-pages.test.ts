/**
 * The rejected-rows report reads the recorded rows in keyset pages (worker/import/report.ts
 * recordedPages), not through a cursor: postgres.js threw inside its cursor when the connection was
 * terminated mid-read, as an unhandled rejection that ended the worker. Here, against the real
 * server: the pages hold every row of the account once, in order; after a connection terminated
 * between pages is closed, the next page comes on a new one and the read goes on exactly; one
 * terminated during a page's statement fails the read to its caller, and nothing goes unhandled.
 * (A page sent in the few milliseconds before postgres.js sees the close fails the same way: the
 * draft is then dropped and the finish writes the report.)
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { connect, type Sql } from '../../src/db';
import { recordedPages } from '../../worker/import/report';
import { rejectsTableDdl } from '../../worker/import/rejects';
import { importBed } from '../helpers/import-bed';

const bed = importBed();
const table = `rejects_pages_${crypto.randomUUID().replaceAll('-', '')}`;
const account = crypto.randomUUID();
const other = crypto.randomUUID();
const ROWS = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377];

const unhandled: unknown[] = [];
const onUnhandled = (e: unknown) => unhandled.push(e);

beforeAll(async () => {
  await bed.db.sql.unsafe(rejectsTableDdl(table));
  for (const [id, rows] of [
    [account, ROWS],
    [other, [4, 6, 7]],
  ] as const)
    await bed.db.sql.unsafe(
      `insert into ${table} (account_id, row_no, reason, column_no, info)
       select $1::uuid, r, 'bad_email', 0, null from unnest($2::int8[]) r`,
      [id, rows],
    );
  process.on('unhandledRejection', onUnhandled);
  process.on('uncaughtException', onUnhandled);
});

afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  process.off('uncaughtException', onUnhandled);
});

/**
 * A one-connection pool of its own, whose backend the test can terminate; `closed()` resolves when
 * postgres.js has seen its connection close since the last call.
 */
function oneConnection(): { sql: Sql; pid: () => Promise<number>; closed: () => Promise<void> } {
  let seen = Promise.withResolvers<void>();
  const sql = connect(bed.db.url, 1, { onclose: () => seen.resolve() });
  const pid = async () => (await sql<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!.pid;
  const closed = async () => {
    await seen.promise;
    seen = Promise.withResolvers<void>();
  };
  return { sql, pid, closed };
}

/** A pool whose connection was broken under it: end() waits for it forever without a timeout. */
const end = (sql: Sql) => sql.end({ timeout: 1 });

const terminate = (pid: number) => bed.db.sql`select pg_terminate_backend(${pid})`;

test('every row of the account once, in row order, in pages of at most the page size', async () => {
  const sql = bed.db.sql;
  for (const size of [1, 4, 13, 100]) {
    const pages: number[][] = [];
    for await (const page of recordedPages(sql, table, account, size)) pages.push(page.map((r) => Number(r.row_no)));
    expect(pages.flat()).toEqual(ROWS);
    expect(pages.every((p) => p.length > 0 && p.length <= size)).toBe(true);
    expect(pages.length).toBe(Math.ceil(ROWS.length / size));
  }
  expect((await recordedPages(sql, table, crypto.randomUUID(), 4).next()).done).toBe(true);
});

test('a connection terminated between pages: the next page comes on a new one, the read stays exact', async () => {
  const { sql, pid, closed } = oneConnection();
  try {
    const got: number[] = [];
    const backends = new Set<number>();
    for await (const page of recordedPages(sql, table, account, 4)) {
      got.push(...page.map((r) => Number(r.row_no)));
      if (backends.size < 2) {
        const backend = await pid();
        backends.add(backend);
        expect((await terminate(backend))[0]!.pg_terminate_backend).toBe(true);
        await closed();
      }
    }
    expect(backends.size).toBe(2);
    expect(got).toEqual(ROWS);
    expect(unhandled).toEqual([]);
  } finally {
    await end(sql);
  }
});

test("a connection terminated during a page's statement fails the read to its caller, nothing unhandled", async () => {
  const { sql, pid } = oneConnection();
  const backend = await pid();
  const lock = await bed.db.sql.reserve();
  try {
    const pages = recordedPages(sql, table, account, 4);
    expect((await pages.next()).value).toHaveLength(4);
    // The next page's statement waits on this lock until its backend is terminated.
    await lock`begin`;
    await lock.unsafe(`lock table ${table} in access exclusive mode`);
    const next = pages.next();
    next.catch(() => {}); // awaited below; no rejection goes unhandled meanwhile
    await waitFor(async () => {
      const [r] = await bed.db.sql<{ waiting: boolean }[]>`
        select wait_event_type = 'Lock' as waiting from pg_stat_activity where pid = ${backend}`;
      return r?.waiting === true;
    });
    await terminate(backend);
    const error = await next.then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    // The server's FATAL admin_shutdown, or the socket's end as postgres.js or the runtime says it.
    expect(['57P01', 'CONNECTION_CLOSED', 'ECONNRESET']).toContain(String(error?.code));
    await pages.return(undefined);
    await lock`rollback`;
    // The same pool carries on, and a new read is whole.
    const again: number[] = [];
    for await (const page of recordedPages(sql, table, account, 4)) again.push(...page.map((r) => Number(r.row_no)));
    expect(again).toEqual(ROWS);
    await Bun.sleep(100); // a library's late throw would land here
    expect(unhandled).toEqual([]);
  } finally {
    lock.release();
    await end(sql);
  }
});

async function waitFor(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`not within ${ms} ms`);
    await Bun.sleep(20);
  }
}

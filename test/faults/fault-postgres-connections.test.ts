// A pinned connection (a transaction's, a reservation's) whose backend dies: every statement on it
// settles with a catchable CONNECTION_CLOSED, nothing escapes as an uncaughtException, and the pool
// goes on. Only this file's own backends are terminated (pg_terminate_backend of their pids), so
// the shared server and other test files are untouched.
import { connect as netConnect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { connect, type Sql, type Tx, isDatabaseUnavailable } from '../../src/db';
import { createTestDatabase, type TestDatabase } from '../helpers/db';

let db: TestDatabase;
let sql: Sql;
let killer: Sql;
const escaped: unknown[] = [];
const onEscape = (e: unknown) => escaped.push(e);

beforeAll(async () => {
  db = await createTestDatabase();
  sql = connect(db.url, 4);
  killer = connect(db.url, 1);
  process.on('uncaughtException', onEscape);
  process.on('unhandledRejection', onEscape);
});
afterAll(async () => {
  process.off('uncaughtException', onEscape);
  process.off('unhandledRejection', onEscape);
  await sql.end({ timeout: 2 });
  await killer.end({ timeout: 2 });
  await db.drop();
});
afterEach(async () => {
  // An escaped nextWrite fires on the next turn of the loop; give it that turn before judging.
  await Bun.sleep(50);
  expect(escaped.map(String)).toEqual([]);
  escaped.length = 0;
});

const terminate = async (pid: number) => {
  await killer`select pg_terminate_backend(${pid})`;
  // The server closes the socket right after; let the client see it.
  await Bun.sleep(200);
};

async function backendPid(handle: Sql | Tx): Promise<number> {
  const [row] = await handle<{ pid: number }[]>`select pg_backend_pid() as pid`;
  return row!.pid;
}

/** How a statement ended, or 'pending' if it did not settle within `ms`. */
async function outcome(p: PromiseLike<unknown>, ms = 3_000): Promise<string> {
  const settled = Promise.resolve(p).then(
    () => 'resolved',
    (e: unknown) => (isDatabaseUnavailable(e) ? 'connection lost' : `rejected: ${String(e)}`),
  );
  return Promise.race([settled, Bun.sleep(ms).then(() => 'pending')]);
}

/**
 * The pool goes on: every statement after the loss answers. (postgres.js 3.4.9 replayed the FATAL of a
 * backend that died mid-statement onto the first statement of that connection's next session,
 * porsager/postgres#1223; patches/postgres+3.4.9.patch ends the FATAL with its session.)
 */
async function poolAnswers(): Promise<void> {
  for (let i = 0; i < 4; i++) {
    expect(await outcome(sql<{ n: number }[]>`select ${i}::int as n`.then((r) => expect(r[0]!.n).toBe(i)))).toBe(
      'resolved',
    );
  }
}

describe('a transaction whose connection dies', () => {
  test('mid-statement: the transaction rejects with the loss, no rollback is written to the dead socket', async () => {
    const run = sql.begin(async (tx) => {
      const pid = await backendPid(tx);
      setTimeout(() => void terminate(pid), 100);
      await tx`select pg_sleep(3)`;
    });
    expect(await outcome(run)).toBe('connection lost');
    await poolAnswers();
  });

  test('between statements: the next statement is refused, the transaction rejects', async () => {
    let next!: Promise<string>;
    const run = sql.begin(async (tx) => {
      const pid = await backendPid(tx);
      await terminate(pid);
      next = outcome(tx`select 1`);
      await next;
    });
    expect(await outcome(run)).toBe('connection lost');
    await Bun.sleep(300); // the transaction rejected at the close; its callback goes on after terminate()
    expect(await next).toBe('connection lost');
    await poolAnswers();
  });

  test('after its last statement: the callback returns, no commit is written to the dead socket', async () => {
    let returned!: () => void;
    const callbackReturned = new Promise<void>((r) => (returned = r));
    const run = sql.begin(async (tx) => {
      const pid = await backendPid(tx);
      await terminate(pid);
      returned();
    });
    expect(await outcome(run)).toBe('connection lost');
    await callbackReturned; // the transaction rejected at the close, before its callback returned
    await Bun.sleep(50);
    await poolAnswers();
  });

  test('a callback that catches the loss and carries on: its statement is refused, nothing escapes', async () => {
    const run = sql.begin(async (tx) => {
      const pid = await backendPid(tx);
      setTimeout(() => void terminate(pid), 100);
      try {
        await tx`select pg_sleep(3)`;
      } catch {
        return tx`select 2`;
      }
    });
    expect(await outcome(run)).toBe('connection lost');
    await poolAnswers();
  });

  test('inside a savepoint: the savepoint is not rolled back on the dead socket', async () => {
    const run = sql.begin(async (tx) => {
      const pid = await backendPid(tx);
      await tx.savepoint(async (sp) => {
        setTimeout(() => void terminate(pid), 100);
        await sp`select pg_sleep(3)`;
      });
    });
    expect(await outcome(run)).toBe('connection lost');
    await poolAnswers();
  });

  test('a transaction on a live connection still commits and rolls back as before', async () => {
    await sql`create table if not exists pinned_probe (n int)`;
    await sql.begin((tx) => tx`insert into pinned_probe values (1)`);
    await expect(
      sql.begin(async (tx) => {
        await tx`insert into pinned_probe values (2)`;
        throw new Error('no');
      }),
    ).rejects.toThrow('no');
    expect((await sql<{ n: number }[]>`select n from pinned_probe order by n`).map((r) => r.n)).toEqual([1]);
  });
});

describe('a reserved connection whose backend dies', () => {
  test('idle when it died: its next statements reject with the loss instead of escaping and hanging', async () => {
    const conn = await sql.reserve();
    const pid = await backendPid(conn);
    await terminate(pid);
    expect(await outcome(conn`select 1`)).toBe('connection lost');
    expect(await outcome(conn`select 1`)).toBe('connection lost');
    conn.release();
    await poolAnswers();
  });

  test('busy when it died: the statement rejects, the next one too', async () => {
    const conn = await sql.reserve();
    const pid = await backendPid(conn);
    setTimeout(() => void terminate(pid), 100);
    expect(await outcome(conn`select pg_sleep(3)`)).toBe('connection lost');
    expect(await outcome(conn.unsafe('select 1'))).toBe('connection lost');
    conn.release();
    await poolAnswers();
  });

  test('released after it died: the closed connection does not go back among the open ones', async () => {
    const conn = await sql.reserve();
    const pid = await backendPid(conn);
    await terminate(pid);
    conn.release();
    await poolAnswers();
  });

  test('a live reservation works and goes back to the pool on release', async () => {
    const conn = await sql.reserve();
    expect(await backendPid(conn)).toBe(await backendPid(conn));
    conn.release();
    expect(await outcome(conn`select 1`)).toBe('connection lost'); // a released handle is not ours any more
    await poolAnswers();
  });
});

describe('a pool connection that closes with a statement just handed to it', () => {
  // postgres.js buffers a small write for its next setImmediate. When the socket's close is handled
  // before that immediate runs (a statement handed to a connection whose socket errored or was read
  // closed in the same turn, as after pg_terminate_backend under load), 3.4.9 cleared the immediate
  // but kept its handle: every later session of that connection queued its StartupMessage behind
  // the dead session's bytes, never sent it, and failed with CONNECT_TIMEOUT after connect_timeout
  // (10 s) against a healthy server, for as long as the process lived (porsager/postgres#1215,
  // #1193). The socket is the driver's own option, so the test can close it at that exact moment.
  test('its next sessions connect at once', async () => {
    const { hostname, port } = new URL(db.url);
    const sockets: Socket[] = [];
    let closeOnNextStatement = false;
    const pool = postgres(db.url, {
      max: 1,
      connect_timeout: 10,
      onnotice: () => {},
      socket: () =>
        new Promise<Socket>((resolve, reject) => {
          const s = netConnect(Number(port), hostname, () => resolve(s)).once('error', reject);
          sockets.push(s);
        }),
      // Called as a statement is built, just before its bytes are buffered.
      debug: () => {
        if (closeOnNextStatement) sockets.at(-1)!.destroy();
        closeOnNextStatement = false;
      },
    } as postgres.Options<{}>); // `socket` is a driver option its types do not list
    try {
      for (let round = 0; round < 3; round++) {
        await pool`select 1`;
        closeOnNextStatement = true;
        expect(await outcome(pool`select 2`)).toBe('connection lost');
        expect(await outcome(pool`select 3`, 3_000)).toBe('resolved');
      }
    } finally {
      await pool.end({ timeout: 2 });
    }
  });
});

describe('a session terminated while it starts', () => {
  // A new session's first statement is the driver's own (fetch_types: the array types). When
  // pg_terminate_backend met it, 3.4.9 rejected that statement's promise, which nothing awaits: an
  // unhandledRejection, which ends the API and the worker. And the FATAL kept from the dead session
  // failed the caller's statement on the next one (porsager/postgres#1192, #1223). A proxy in front
  // of the server answers the first session's array-types query with the very message a terminated
  // backend sends, then closes, as the server does; later sessions pass through.
  function fatal(): Buffer {
    const fields = [
      ['S', 'FATAL'],
      ['V', 'FATAL'],
      ['C', '57P01'],
      ['M', 'terminating connection due to administrator command'],
    ];
    const body = Buffer.concat([...fields.map(([k, v]) => Buffer.from(`${k}${v}\0`)), Buffer.from([0])]);
    const head = Buffer.alloc(5);
    head.write('E');
    head.writeUInt32BE(body.length + 4, 1);
    return Buffer.concat([head, body]);
  }

  async function terminatingProxy(): Promise<{ url: string; terminated: () => number; server: Server }> {
    const target = new URL(db.url);
    let terminated = 0;
    const server = createServer((client) => {
      const upstream = netConnect(Number(target.port), target.hostname);
      upstream.on('data', (d) => client.write(d));
      client.on('data', (d) => {
        if (terminated === 0 && d.includes('pg_catalog.pg_type')) {
          terminated++;
          upstream.destroy();
          client.end(fatal());
        } else upstream.write(d);
      });
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = new URL(db.url);
    url.port = String((server.address() as { port: number }).port);
    return { url: url.toString(), terminated: () => terminated, server };
  }

  test("while it fetches the array types: the caller's statement runs on the next session, none escapes", async () => {
    const proxy = await terminatingProxy();
    const pool = postgres(proxy.url, { max: 1, onnotice: () => {} });
    try {
      expect(await outcome(pool<{ n: number }[]>`select 7::int as n`.then((r) => r[0]!.n))).toBe('resolved');
      expect(proxy.terminated()).toBe(1);
      // The next session fetched the types: an array parameter is sent and read back as one.
      const [row] = await pool<{ xs: number[] }[]>`select ${pool.array([1, 2])}::int[] as xs`;
      expect(row!.xs).toEqual([1, 2]);
    } finally {
      await pool.end({ timeout: 2 });
      proxy.server.close();
    }
  });
});

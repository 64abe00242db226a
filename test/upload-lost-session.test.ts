// An upload's body is read once, so a PUT /uploads/{token} whose database session ends under it
// (pg_terminate_backend, a pooler closing the connection) cannot be sent through the app again as
// other requests are (src/http/lost-session.ts): its statements are (againOnLostSession), and the
// local store's commit holds when it runs twice. Met in the chaos soak: a PUT answered 503 at a
// pg-terminate while PostgreSQL was up.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect, type Sql } from '../src/db';
import { DatabaseCircuit } from '../src/db-circuit';
import { isConnectionGone } from '../src/db-unavailable';
import { againOnLostSession } from '../src/http/lost-session';
import { LocalStore } from '../src/storage/local';
import { UploadTokens } from '../src/storage/upload-token';
import { createTestDatabase, type TestDatabase } from './helpers/db';

let db: TestDatabase;
let sql: Sql;
let killer: Sql;
let circuit: DatabaseCircuit;

beforeAll(async () => {
  db = await createTestDatabase();
  sql = connect(db.url, 1);
  killer = connect(db.url, 1);
  circuit = new DatabaseCircuit(() => killer`select 1`);
});
afterAll(async () => {
  await sql.end({ timeout: 2 });
  await killer.end({ timeout: 2 });
  await db.drop();
});

/** A statement on the pool whose backend is terminated while it runs: it rejects with the loss. */
async function statementThatLosesItsSession(): Promise<never> {
  const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
  const pid = row!.pid;
  // A query runs once awaited (postgres.js queries are lazy): then() sends it.
  setTimeout(() => void killer`select pg_terminate_backend(${pid})`.then(() => undefined), 100);
  await sql`select pg_sleep(5)`;
  throw new Error('the statement outlived its terminated session');
}

describe('againOnLostSession', () => {
  test('a statement whose session ended is run again on another connection, once the database answers', async () => {
    let calls = 0;
    const n = await againOnLostSession(
      'test',
      async () => {
        if (++calls === 1) await statementThatLosesItsSession();
        const [row] = await sql<{ n: number }[]>`select 7 as n`;
        return row!.n;
      },
      circuit,
    );
    expect({ n, calls }).toEqual({ n: 7, calls: 2 });
  });

  test('the loss itself is what a first attempt meets (so the test above is not vacuous)', async () => {
    const e = await statementThatLosesItsSession().catch((err: unknown) => err);
    expect(isConnectionGone(e)).toBe(true);
  });

  test('any other failure is not run again', async () => {
    let calls = 0;
    const e = await againOnLostSession(
      'test',
      async () => {
        calls++;
        await sql`select * from no_such_table`;
      },
      circuit,
    ).catch((err: unknown) => err);
    expect(String(e)).toContain('no_such_table');
    expect(calls).toBe(1);
  });

  test('not run again when the probe finds the database away, nor without a circuit', async () => {
    const away = new DatabaseCircuit(() => Promise.reject(Object.assign(new Error('down'), { code: 'ECONNREFUSED' })));
    for (const c of [away, undefined]) {
      let calls = 0;
      const e = await againOnLostSession(
        'test',
        async () => {
          calls++;
          await statementThatLosesItsSession();
        },
        c,
      ).catch((err: unknown) => err);
      expect(isConnectionGone(e)).toBe(true);
      expect(calls).toBe(1);
    }
  });

  test('at most three more times', async () => {
    let calls = 0;
    const e = await againOnLostSession(
      'test',
      async () => {
        calls++;
        await statementThatLosesItsSession();
      },
      circuit,
    ).catch((err: unknown) => err);
    expect(isConnectionGone(e)).toBe(true);
    expect(calls).toBe(4);
  });
});

describe("the local store's commit, run twice", () => {
  test('the second finds its version in place and leaves the object as the first did', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'commit-twice-'));
    try {
      const store = new LocalStore(dir, 'http://localhost:0', new UploadTokens(Buffer.alloc(32)));
      const body = (async function* () {
        yield new TextEncoder().encode('Email\na@example.com\n');
      })();
      const received = await store.receive('imports/a/b.csv', body);
      await store.commit('imports/a/b.csv', received);
      await store.commit('imports/a/b.csv', received);
      expect((await store.head('imports/a/b.csv'))?.etag).toBe(`"${received.md5}"`);
      expect((await store.head('imports/a/b.csv'))?.size).toBe(received.size);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a commit whose file is gone and was never in place still fails', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'commit-gone-'));
    try {
      const store = new LocalStore(dir, 'http://localhost:0', new UploadTokens(Buffer.alloc(32)));
      const body = (async function* () {
        yield new TextEncoder().encode('Email\nb@example.com\n');
      })();
      const received = await store.receive('imports/a/c.csv', body);
      await store.discard(received);
      expect(
        await store.commit('imports/a/c.csv', received).then(
          () => 'committed',
          (e: unknown) => String(e),
        ),
      ).toContain('ENOENT');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

// An upload's body is read once, so a PUT /uploads/{token} whose database session ends under it
// (pg_terminate_backend, a pooler closing the connection) cannot be sent through the app again as
// other requests are (src/http/lost-session.ts): its statements are (againOnLostSession), and the
// local store's commit holds when it runs twice. Met in the chaos soak: a PUT answered 503 at a
// pg-terminate while PostgreSQL was up.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect, type Sql, DatabaseCircuit, isConnectionGone } from '../../src/db';
import { againOnLostSession } from '../../src/http/lost-session';
import { LocalStore } from '../../src/storage/local';
import { UploadTokens } from '../../src/storage/upload-token';
import { createTestDatabase, type TestDatabase } from '../helpers/db';

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
    const { error, calls } = await attempts(() => sql`select * from no_such_table`, circuit);
    expect(String(error)).toContain('no_such_table');
    expect(calls).toBe(1);
  });

  test('not run again when the probe finds the database away, nor without a circuit', async () => {
    const away = new DatabaseCircuit(() => Promise.reject(Object.assign(new Error('down'), { code: 'ECONNREFUSED' })));
    for (const c of [away, undefined]) {
      const { error, calls } = await attempts(statementThatLosesItsSession, c);
      expect(isConnectionGone(error)).toBe(true);
      expect(calls).toBe(1);
    }
  });

  test('at most three more times', async () => {
    const { error, calls } = await attempts(statementThatLosesItsSession, circuit);
    expect(isConnectionGone(error)).toBe(true);
    expect(calls).toBe(4);
  });
});

/** `work` through againOnLostSession, expected to fail: how it failed and how many times it ran. */
async function attempts(
  work: () => PromiseLike<unknown>,
  c: DatabaseCircuit | undefined,
): Promise<{ error: unknown; calls: number }> {
  let calls = 0;
  const error = await againOnLostSession(
    'test',
    async () => {
      calls++;
      await work();
    },
    c,
  ).then(
    () => undefined,
    (e: unknown) => e,
  );
  return { error, calls };
}

/** A store in a fresh directory with one received (not yet committed) file of `text`. */
async function withReceived(
  text: string,
  check: (store: LocalStore, received: Awaited<ReturnType<LocalStore['receive']>>) => Promise<void>,
): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'commit-'));
  try {
    const store = new LocalStore(dir, 'http://localhost:0', new UploadTokens(Buffer.alloc(32)));
    const body = (async function* () {
      yield new TextEncoder().encode(text);
    })();
    await check(store, await store.receive('imports/a/b.csv', body));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe("the local store's commit, run twice", () => {
  test('the second finds its version in place and leaves the object as the first did', async () => {
    await withReceived('Email\na@example.com\n', async (store, received) => {
      await store.commit('imports/a/b.csv', received);
      await store.commit('imports/a/b.csv', received);
      const head = await store.head('imports/a/b.csv');
      expect({ etag: head?.etag, size: head?.size }).toEqual({ etag: `"${received.md5}"`, size: received.size });
    });
  });

  test('a commit whose file is gone and was never in place still fails', async () => {
    await withReceived('Email\nb@example.com\n', async (store, received) => {
      await store.discard(received);
      const outcome = await store.commit('imports/a/b.csv', received).then(
        () => 'committed',
        (e: unknown) => String(e),
      );
      expect(outcome).toContain('ENOENT');
    });
  });
});

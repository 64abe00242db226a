/**
 * The API while PostgreSQL is away (issue "Hardening"): every request that needs the database is
 * answered 503 api_error problem+json with Retry-After, never a 500, a hang or a dropped
 * connection; /readyz says 503; and once PostgreSQL is back the API serves 2xx by itself.
 *
 * The restart test prints one JSON line (fault, recovery time) for the hardening notes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { buildApp } from '../../src/app';
import { LocalStore } from '../../src/storage/local';
import { UploadTokens } from '../../src/storage/upload-token';
import { uploadHandler } from '../../src/uploads';
import { freePort } from '../../src/embedded';
import { connect, type Sql } from '../../src/db';
import { testApp, type TestApp } from '../helpers/app';
import { faultBed, type Child, type FaultBed } from '../helpers/fault-bed';
import { createAccount, createKey } from '../helpers/fixtures';

const md5 = (s: string) => createHash('md5').update(s.toLowerCase()).digest('hex');

function expectUnavailable(status: number, headers: Headers, body: Record<string, unknown>): void {
  expect(status).toBe(503);
  expect(headers.get('content-type')).toBe('application/problem+json');
  expect(Number(headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(body).toMatchObject({ status: 503, code: 'api_error', title: 'Service unavailable' });
  expect(String(body.type)).toEndWith('/error-codes#api_error');
}

describe('a database that cannot be reached', () => {
  let t: TestApp;
  let down: Sql;
  let app: ReturnType<typeof buildApp>;

  beforeAll(async () => {
    t = await testApp();
    // A real PostgreSQL URL on a port where nothing listens: every connection attempt is refused.
    down = connect(`postgres://postgres@127.0.0.1:${await freePort()}/contacts`, 2);
    app = buildApp({ ...t.deps, sql: down });
  });
  afterAll(async () => {
    await down.end({ timeout: 1 });
    await t.close();
  });

  const send = async (method: string, path: string, body?: unknown) => {
    const res = await app.handle(
      new Request(`http://localhost${path}`, {
        method,
        headers: {
          authorization: `Bearer ${t.key}`,
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      }),
    );
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  };

  test('the upload link answers S3-style 503 ServiceUnavailable with Retry-After, not an internal error', async () => {
    const store = new LocalStore(
      '/tmp/contact-service-test-objects',
      'http://localhost:0',
      new UploadTokens(Buffer.from('upload secret')),
    );
    const upload = uploadHandler({ ...t.deps, sql: down, storage: store });
    const token = store.tokens.sign({
      accountId: t.accountId,
      importId: crypto.randomUUID(),
      expiresAt: Math.floor(Date.now() / 1000) + 3600,
    });
    const res = await upload(
      new Request(`http://localhost/uploads/${token}`, { method: 'PUT', body: 'Email\na@example.com\n' }),
    );
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(await res.text()).toContain('<Code>ServiceUnavailable</Code>');
  });

  test('a read is 503 api_error problem+json with Retry-After', async () => {
    const r = await send('GET', `/v1/contacts/${md5('a@example.com')}`);
    expectUnavailable(r.status, r.headers, r.body);
  });

  test('a write is 503 api_error problem+json with Retry-After', async () => {
    const r = await send('POST', '/v1/contacts', { email: 'a@example.com' });
    expectUnavailable(r.status, r.headers, r.body);
  });

  test('a list is 503 api_error problem+json with Retry-After', async () => {
    const r = await send('GET', '/v1/brands');
    expectUnavailable(r.status, r.headers, r.body);
  });

  test('/readyz is 503 and names the database', async () => {
    const r = await send('GET', '/readyz');
    expect(r.status).toBe(503);
    expect(r.body).toMatchObject({ status: 'not ready', checks: { database: 'down' } });
  });

  test('an error that is not about the database stays a 500 api_error', async () => {
    // Lazy like postgres.js's queries: a statement fails only when awaited, and a fragment built
    // for another statement (src/auth/suspension.ts) is never awaited, so it must not reject alone.
    const boom = () => ({
      then: (ok: (v: never) => unknown, bad: (e: unknown) => unknown) =>
        Promise.reject(new TypeError('boom')).then(ok, bad),
    });
    const broken = buildApp({ ...t.deps, sql: Object.assign(boom, t.deps.sql) as unknown as Sql });
    const res = await broken.handle(
      new Request(`http://localhost/v1/brands`, { headers: { authorization: `Bearer ${t.key}` } }),
    );
    expect(res.status).toBe(500);
    expect(res.headers.get('retry-after')).toBeNull();
    expect(await res.json()).toMatchObject({ status: 500, code: 'api_error', title: 'Internal error' });
  });
});

describe('PostgreSQL restarts (immediate) under API traffic', () => {
  let bed: FaultBed;
  let api: Child;
  let key: string;
  let known: string;

  beforeAll(async () => {
    bed = await faultBed();
    const accountId = await createAccount(bed.sql);
    key = await createKey(bed.sql, accountId);
    api = await bed.start('api', { APP_NAME: 'pg-fault-api' });
    known = 'known@example.com';
    const created = await fetch(`${api.url}/v1/contacts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: known }),
    });
    expect(created.status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await bed?.stop();
  });

  interface Answer {
    what: string;
    startedAt: number;
    endedAt: number;
    status?: number;
    problem?: string;
    dropped?: string;
  }

  /** One request; what came back, judged: 2xx, or 503 as the contract says, or what went wrong. */
  async function request(what: string, path: string, init: RequestInit = {}, asKey = key): Promise<Answer> {
    const startedAt = Date.now();
    try {
      const res = await fetch(`${api.url}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${asKey}`, 'content-type': 'application/json' },
        signal: AbortSignal.timeout(15_000),
      });
      const text = await res.text();
      const a: Answer = { what, startedAt, endedAt: Date.now(), status: res.status };
      if (res.status === 503 && what !== 'readyz') {
        let body: Record<string, unknown> = {};
        try {
          body = JSON.parse(text);
        } catch {
          // Not JSON: body stays {}, and the check below reports the answer.
        }
        const ok =
          res.headers.get('content-type') === 'application/problem+json' &&
          body.code === 'api_error' &&
          Number(res.headers.get('retry-after')) >= 1;
        if (!ok)
          a.problem =
            '503 without the problem+json api_error and Retry-After: ' +
            `${res.headers.get('content-type')} ${res.headers.get('retry-after')} ${text.slice(0, 200)}`;
      } else if (res.status === 503 && what === 'readyz') {
        // readiness: 503 is its answer while the database is away
      } else if (res.status < 200 || res.status > 299) {
        a.problem = `${res.status}: ${text.slice(0, 200)}`;
      }
      return a;
    } catch (e) {
      return { what, startedAt, endedAt: Date.now(), dropped: String(e) };
    }
  }

  let n = 0;
  const kinds = [
    () => request('get contact', `/v1/contacts/${md5(known)}`),
    () =>
      request('create contact', '/v1/contacts', {
        method: 'POST',
        body: JSON.stringify({ email: `traffic-${n++}@example.com` }),
      }),
    () =>
      request('patch contact', `/v1/contacts/${md5(known)}`, {
        method: 'PATCH',
        body: JSON.stringify({ attributes: {} }),
      }),
    () => request('list brands', '/v1/brands'),
    () => request('readyz', '/readyz'),
  ];

  const faults = {
    'PostgreSQL restart -m immediate': () => bed.restartPostgres(),
    "pg_terminate_backend of the API's connections": async () => {
      await bed.sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'pg-fault-api'`;
    },
  };

  for (const [fault, inject] of Object.entries(faults))
    test(
      `${fault}: only 2xx or 503 api_error with Retry-After, ` +
        'no dropped connection, no exit, and 2xx again by itself',
      async () => {
        const answers: Answer[] = [];
        let stop = false;
        const clients = Array.from({ length: 6 }, async (_, c) => {
          for (let i = c; !stop; i++) {
            answers.push(await kinds[i % kinds.length]!());
            await Bun.sleep(5);
          }
        });
        await Bun.sleep(1_000);
        const faultAt = Date.now();
        await inject();
        const restartedAt = Date.now();
        // Until every kind of request has been answered 2xx after the restart, and a while longer.
        const deadline = Date.now() + 30_000;
        const recovered = () =>
          kinds.length ===
          new Set(
            answers.filter((a) => a.startedAt > restartedAt && a.status! >= 200 && a.status! < 300).map((a) => a.what),
          ).size;
        while (!recovered() && Date.now() < deadline) await Bun.sleep(50);
        await Bun.sleep(1_000);
        stop = true;
        await Promise.all(clients);

        const wrong = answers.filter((a) => a.problem || a.dropped);
        expect(wrong).toEqual([]);
        expect(recovered()).toBe(true);
        if (fault.startsWith('PostgreSQL restart')) {
          const during = answers.filter((a) => a.startedAt >= faultAt && a.startedAt <= restartedAt);
          // The traffic did meet the outage.
          expect(during.some((a) => a.status === 503 && a.what !== 'readyz')).toBe(true);
        }
        expect(api.proc.exitCode).toBeNull();
        expect(await bed.tail(api, 400)).not.toMatch(/uncaughtException|unhandledRejection|socket\.write/);

        // Back: the first 2xx of a request sent after the last one that was answered 503.
        const api503 = answers.filter((a) => a.what !== 'readyz' && a.status === 503);
        const lastDown = Math.max(faultAt, ...api503.map((a) => a.startedAt));
        const firstOk = answers
          .filter((a) => a.what !== 'readyz' && a.startedAt > lastDown && a.status! < 300)
          .sort((a, b) => a.endedAt - b.endedAt)[0]!;
        const by = (s: (a: Answer) => boolean) => answers.filter(s).length;
        console.log(
          JSON.stringify({
            fault,
            phase: 'API traffic',
            faultMs: restartedAt - faultAt,
            recoveryMs: firstOk.endedAt - faultAt,
            requests: answers.length,
            ok: by((a) => a.status! < 300),
            unavailable: by((a) => a.status === 503),
            slowest: answers.reduce(
              (m, a) =>
                a.endedAt - a.startedAt > m.ms ? { ms: a.endedAt - a.startedAt, what: a.what, status: a.status } : m,
              { ms: 0 } as { ms: number; what?: string; status?: number },
            ),
          }),
        );
      },
      60_000,
    );

  const again =
    "pg_terminate_backend of the API's connections again and again: a contact request is sent again, never 503";
  test(
    again,
    async () => {
      // The database is there; only the sessions end. A request whose session ended under it is sent
      // again on another connection (src/http/lost-session.ts), so the client sees no 503.
      const answers: Answer[] = [];
      let stop = false;
      const contactKinds = kinds.slice(0, 3);
      const clients = Array.from({ length: 8 }, async (_, c) => {
        for (let i = c; !stop; i++) answers.push(await contactKinds[i % contactKinds.length]!());
      });
      await Bun.sleep(500);
      let terminated = 0;
      for (let round = 0; round < 12; round++) {
        const [row] = await bed.sql<{ n: number }[]>`
        select count(*) filter (where pg_terminate_backend(pid))::int as n
        from pg_stat_activity where application_name = 'pg-fault-api' and state = 'active'`;
        terminated += row!.n;
        await Bun.sleep(300);
      }
      await Bun.sleep(500);
      stop = true;
      await Promise.all(clients);
      expect(terminated).toBeGreaterThan(0); // the kills met statements under way
      expect(answers.filter((a) => a.problem || a.dropped || (a.status !== 200 && a.status !== 201))).toEqual([]);
      // The whole log: the resends come at the kills, thousands of request lines before its end.
      expect(await bed.tail(api, Number.MAX_SAFE_INTEGER)).toContain('request sent again');
    },
    60_000,
  );
  test("an import's create whose session is terminated under it is sent again: 201, one import", async () => {
    const accountId = await createAccount(bed.sql);
    const importKey = await createKey(bed.sql, accountId);
    // The create's insert waits on a lock held here, so the terminate meets it under way.
    const holder = await bed.sql.reserve();
    try {
      await holder`begin`;
      await holder`lock table contact_imports in exclusive mode`;
      const created = request(
        'create import',
        '/v1/contact-imports',
        { method: 'POST', body: JSON.stringify({ columns: ['Email'], duplicateContactStrategy: 'overwrite' }) },
        importKey,
      );
      const waiting = async () => {
        const rows = await bed.sql<{ pid: number }[]>`
          select pid from pg_stat_activity
          where application_name = 'pg-fault-api' and wait_event_type = 'Lock' and query ilike '%contact_imports%'`;
        return rows[0]?.pid;
      };
      let pid: number | undefined;
      for (let i = 0; i < 100 && pid === undefined; i++) pid = (await waiting()) ?? (await Bun.sleep(50), undefined);
      expect(pid).toBeDefined();
      await bed.sql`select pg_terminate_backend(${pid!})`;
      await holder`rollback`;
      const answer = await created;
      expect(answer).toMatchObject({ status: 201 });
      expect(answer.problem).toBeUndefined();
    } finally {
      holder.release();
    }
    const [row] = await bed.sql<
      { n: number }[]
    >`select count(*)::int as n from contact_imports where account_id = ${accountId}`;
    expect(row!.n).toBe(1);
    expect(await bed.tail(api, Number.MAX_SAFE_INTEGER)).toMatch(
      /request sent again[^\n]*"route":"\/v1\/contact-imports"/,
    );
  }, 30_000);
});

/**
 * The API while PostgreSQL does not answer at all (issue 39, "fast refusal"): once the API knows the
 * database is away, every request that needs it is answered 503 api_error problem+json with
 * Retry-After within 1 s, /readyz says so as fast, and the first request after PostgreSQL is back
 * succeeds. The server is stopped and its port taken by a listener that accepts connections and
 * never answers (a server too loaded to answer, or a network that drops the packets): a connection
 * attempt then waits out postgres.js's connect_timeout (10 s) instead of being refused at once.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createServer, type Server, type Socket } from 'node:net';
import { createHash } from 'node:crypto';
import { faultBed, type Child, type FaultBed } from '../helpers/fault-bed';
import { createAccount, createKey } from '../helpers/fixtures';

const md5 = (s: string) => createHash('md5').update(s.toLowerCase()).digest('hex');

interface Answer {
  status: number;
  ms: number;
  contentType: string | null;
  retryAfter: string | null;
  body: Record<string, unknown>;
}

describe('PostgreSQL that does not answer', () => {
  let bed: FaultBed;
  let api: Child;
  let key: string;
  const port = () => Number(new URL(bed.databaseUrl).port);

  beforeAll(async () => {
    bed = await faultBed();
    const accountId = await createAccount(bed.sql);
    key = await createKey(bed.sql, accountId);
    api = await bed.start('api', { APP_NAME: 'circuit-api' });
  });
  afterAll(async () => {
    await bed?.stop();
  });

  const send = async (method: string, path: string, body?: unknown): Promise<Answer> => {
    const started = performance.now();
    const res = await fetch(`${api.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(30_000),
    });
    const json = (await res.json()) as Record<string, unknown>;
    return {
      status: res.status,
      ms: performance.now() - started,
      contentType: res.headers.get('content-type'),
      retryAfter: res.headers.get('retry-after'),
      body: json,
    };
  };
  const wave = (n: number) =>
    Promise.all(
      Array.from({ length: n }, (_, i) =>
        i % 2
          ? send('GET', `/v1/contacts/${md5(`c${i}@example.com`)}`)
          : send('POST', '/v1/contacts', { email: `c${i}-${Date.now()}@example.com` }),
      ),
    );

  test('refused within 1 s once the API knows, /readyz says so, the first request after it succeeds', async () => {
    expect((await send('POST', '/v1/contacts', { email: 'before@example.com' })).status).toBe(201);

    await bed.stopPostgres();
    const silent: Socket[] = [];
    const blackhole: Server = createServer((socket) => silent.push(socket));
    await new Promise<void>((resolve) => blackhole.listen(port(), '127.0.0.1', resolve));
    try {
      // The first requests learn that the database is away (each may wait for the pool); from the
      // first 503 on, the API knows.
      const answers: Answer[] = [];
      const deadline = Date.now() + 25_000;
      while (!answers.some((a) => a.status === 503) && Date.now() < deadline) answers.push(...(await wave(4)));
      expect(answers.map((a) => a.status)).toContain(503);

      const known: Answer[] = [];
      for (let round = 0; round < 5; round++) {
        known.push(...(await wave(20)));
        await Bun.sleep(150);
      }
      for (const a of known) {
        expect(a.status).toBe(503);
        expect(a.contentType).toBe('application/problem+json');
        expect(Number(a.retryAfter)).toBeGreaterThanOrEqual(1);
        expect(a.body).toMatchObject({ status: 503, code: 'api_error', title: 'Service unavailable' });
      }
      expect(Math.max(...known.map((a) => a.ms))).toBeLessThan(1_000);

      const started = performance.now();
      const ready = await fetch(`${api.url}/readyz`);
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ checks: { database: 'down' } });
    } finally {
      for (const s of silent) s.destroy();
      await new Promise((resolve) => blackhole.close(resolve));
    }

    await bed.startPostgres();
    // PostgreSQL answers again (the bed's own pool reconnects on its own):
    for (let i = 0; (await bed.sql`select 1`.then(() => false).catch(() => true)) && i < 100; i++) await Bun.sleep(100);
    const first = await send('GET', `/v1/contacts/${md5('before@example.com')}`);
    expect(first.status).toBe(200);
    expect((await fetch(`${api.url}/readyz`)).status).toBe(200);
  }, 90_000);
});

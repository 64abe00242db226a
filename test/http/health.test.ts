// /healthz and /readyz: no auth, for load balancers and the container HEALTHCHECK.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { buildApp } from '../../src/app';
import type { Deps } from '../../src/deps';
import type { Sql } from '../../src/db';
import { testApp, type TestApp } from '../helpers/app';

let t: TestApp;

beforeAll(async () => {
  t = await testApp();
});
afterAll(() => t.close());

async function get(app: { handle(r: Request): Promise<Response> }, path: string, headers: Record<string, string> = {}) {
  const res = await app.handle(new Request(`http://localhost${path}`, { headers }));
  return { status: res.status, body: await res.json() };
}

/** A database that refuses every query, as when PostgreSQL is unreachable. */
const downSql = (() => Promise.reject(new Error('connection refused'))) as unknown as Sql;

describe('GET /healthz', () => {
  test('is 200 without any Authorization header', async () => {
    const res = await t.call('GET', '/healthz', { key: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  test('ignores an invalid Authorization header', async () => {
    expect((await t.call('GET', '/healthz', { key: 'ck_invalid' })).status).toBe(200);
  });

  test('is 200 even when the database is down (liveness, not readiness)', async () => {
    const app = buildApp({ ...t.deps, sql: downSql });
    expect((await get(app, '/healthz')).status).toBe(200);
  });
});

describe('GET /readyz', () => {
  test('is 200 without auth when the database answers', async () => {
    const res = await t.call('GET', '/readyz', { key: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready', checks: { database: 'ok' } });
  });

  test('is 503 when the database does not answer', async () => {
    const app = buildApp({ ...t.deps, sql: downSql });
    const res = await get(app, '/readyz');
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ status: 'not ready', checks: { database: 'down' } });
  });

  test('checks the job queue when there is one: 200 when it answers, 503 when not', async () => {
    const queue = (ping: () => Promise<unknown>) => ({ ping }) as unknown as NonNullable<Deps['queue']>;
    const up = await get(buildApp({ ...t.deps, queue: queue(async () => 'PONG') }), '/readyz');
    expect(up).toEqual({ status: 200, body: { status: 'ready', checks: { database: 'ok', redis: 'ok' } } });
    const down = await get(
      buildApp({ ...t.deps, queue: queue(async () => Promise.reject(new Error('no redis'))) }),
      '/readyz',
    );
    expect(down).toEqual({ status: 503, body: { status: 'not ready', checks: { database: 'ok', redis: 'down' } } });
  });
});

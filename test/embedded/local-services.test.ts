// The embedded local services against the real binaries: start, answer, reuse, stop.
// Slow on a fresh machine (initdb, and apt-get install of redis-server when missing), hence the timeouts.
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import postgres from 'postgres';
import { ensureLocalPostgres, ensureLocalRedis, type LocalService } from '../../src/embedded';
import { isPortOpen } from '../../src/embedded/ports';

const SLOW = 300_000;
const portOf = (url: string) => Number(new URL(url).port);
let dataDir = '';
const started: LocalService[] = [];

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'local-services-'));
  await chmod(dataDir, 0o755); // the postgres OS user must traverse it when the tests run as root
});

afterAll(async () => {
  // Whatever a failed test left running
  await Promise.allSettled(started.map((s) => s.stop()));
  await rm(dataDir, { recursive: true, force: true });
});

async function selectOne(url: string): Promise<number> {
  const sql = postgres(url, { max: 1 });
  try {
    const [row] = await sql<{ one: number }[]>`select 1 as one`;
    return row?.one ?? 0;
  } finally {
    await sql.end();
  }
}

test(
  'postgres: starts, answers, is reused, stops',
  async () => {
    const pg = await ensureLocalPostgres({ dataDir });
    started.push(pg);
    expect(pg.startedByUs).toBe(true);
    expect(pg.url).toMatch(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/contacts$/);
    expect(await selectOne(pg.url)).toBe(1);

    const again = await ensureLocalPostgres({ dataDir });
    expect(again).toMatchObject({ startedByUs: false, url: pg.url });
    await again.stop(); // a reuser's stop() leaves the server alone
    expect(await selectOne(pg.url)).toBe(1);

    await pg.stop();
    expect(await isPortOpen(portOf(pg.url))).toBe(false);
  },
  SLOW,
);

test(
  'postgres: a stale postmaster.pid does not block, concurrent callers share one server',
  async () => {
    // A pid that certainly belonged to a process that is gone now
    const gone = Bun.spawn(['true']);
    await gone.exited;
    await writeFile(join(dataDir, 'postgres', 'postmaster.pid'), `${gone.pid}\n${dataDir}/postgres\n0\n5432\n`);

    const both = await Promise.all([ensureLocalPostgres({ dataDir }), ensureLocalPostgres({ dataDir })]);
    started.push(...both);
    expect(both.filter((s) => s.startedByUs)).toHaveLength(1);
    expect(both[0]?.url).toBe(both[1]?.url ?? '');
    expect(await selectOne(both[0]?.url ?? '')).toBe(1);

    await Promise.all(both.map((s) => s.stop()));
    expect(await isPortOpen(portOf(both[0]?.url ?? ''))).toBe(false);
  },
  SLOW,
);

test(
  'redis: starts, answers PING, is reused, stops',
  async () => {
    const redis = await ensureLocalRedis({ dataDir, log: (msg) => console.log(`[redis] ${msg}`) });
    started.push(redis);
    expect(redis.startedByUs).toBe(true);
    expect(redis.url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);

    const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await client.connect();
      expect(await client.ping()).toBe('PONG');
    } finally {
      client.disconnect();
    }

    const again = await ensureLocalRedis({ dataDir });
    expect(again).toMatchObject({ startedByUs: false, url: redis.url });
    await again.stop();
    expect(await isPortOpen(portOf(redis.url))).toBe(true);

    await redis.stop();
    expect(await isPortOpen(portOf(redis.url))).toBe(false);
  },
  SLOW,
);

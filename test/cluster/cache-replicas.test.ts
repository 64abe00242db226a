/**
 * Cache invalidation across API replicas on a Citus cluster: two API processes from the real entry
 * point, one connected to each worker (docs/scaling-out.md), each with its caches warm, and changes
 * made with the admin CLI connected to one node or another (a key revoked, an account suspended, an
 * attribute added: the API changes none of these). Every change must reach both APIs' answers
 * within a second, with nothing depending on a trigger firing where an API listens.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../src/embedded/ports';
import { runAdmin } from '../helpers/admin-cli';
import { createTestDatabase, type TestDatabase } from '../helpers/db';

const ROOT = join(import.meta.dir, '../..');
const WITHIN_MS = 1_000;
let db: TestDatabase;
let dir: string;
const apis: { url: string; proc: ReturnType<typeof Bun.spawn> }[] = [];

/** The admin CLI connected to `url` (the coordinator unless given). */
async function adminOn(url: string, ...args: string[]): Promise<any> {
  const { out, err, code } = await runAdmin(url, args);
  if (code !== 0) throw new Error(`admin ${args.join(' ')}: exit ${code}: ${err}`);
  return JSON.parse(out);
}

const admin = (...args: string[]) => adminOn(db.url, ...args);

async function startApi(k: number, databaseUrl: string): Promise<void> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = Bun.spawn([join(ROOT, 'node_modules/.bin/bun'), 'src/index.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      REDIS_URL: db.redisUrl,
      HOST: '127.0.0.1',
      PORT: String(port),
      PUBLIC_URL: url,
      DATA_DIR: join(dir, `api-${k}`),
      STORAGE_DRIVER: 'local',
      STORAGE_DIR: join(dir, 'objects'),
      UPLOAD_SECRET: 'cache-replicas-upload-secret',
      MIGRATE_ON_START: 'false',
      LOG_LEVEL: 'warn',
    },
    stdout: 'ignore',
    stderr: 'inherit',
  });
  apis.push({ url, proc });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await fetch(`${url}/healthz`)
      .then((r) => r.ok)
      .catch(() => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`API ${k} did not come up`);
    await Bun.sleep(100);
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
  const [citus] = await db.sql`select 1 from pg_extension where extname = 'citus'`;
  if (!citus) throw new Error('test/cluster/ runs on a Citus cluster: CITUS_WORKERS=2 bun test/run.ts test/cluster');
  dir = await mkdtemp(join(tmpdir(), 'cache-replicas-'));
  const [w1, w2] = db.workerUrls;
  if (!w1 || !w2) throw new Error('test/cluster/cache-replicas.test.ts needs 2 Citus workers');
  await startApi(1, w1);
  await startApi(2, w2);
}, 60_000);

afterAll(async () => {
  for (const a of apis) a.proc.kill('SIGKILL');
  await Promise.all(apis.map((a) => a.proc.exited));
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const call = (url: string, key: string, path: string, body?: unknown) =>
  fetch(`${url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });

/** Milliseconds until every API answers `path` with `status` (polled), or the test fails past WITHIN_MS. */
async function untilAll(status: number, request: (url: string) => Promise<Response>): Promise<number> {
  const started = performance.now();
  for (;;) {
    const got = await Promise.all(apis.map(async (a) => (await request(a.url)).status));
    if (got.every((s) => s === status)) return performance.now() - started;
    if (performance.now() - started > WITHIN_MS) throw new Error(`after ${WITHIN_MS} ms the APIs answer ${got}`);
    await Bun.sleep(20);
  }
}

test('a key revoked with the admin CLI is refused by both APIs within a second', async () => {
  const { id: account } = await admin('account', 'create', '--name', 'Replicas');
  const { id: keyId, key } = await admin('key', 'create', '--account', account);
  // Both caches hold the key: several answers each, on the cached path.
  for (let i = 0; i < 3; i++) for (const a of apis) expect((await call(a.url, key, '/v1/brands')).status).toBe(200);
  await admin('key', 'revoke', '--key-id', keyId);
  const ms = await untilAll(401, (url) => call(url, key, '/v1/brands'));
  console.log(JSON.stringify({ change: 'key revoke', ms: Math.round(ms) }));
});

test('an account suspended with the admin CLI on a worker is refused by both APIs within a second', async () => {
  const { id: account } = await admin('account', 'create', '--name', 'Suspended');
  const { key } = await admin('key', 'create', '--account', account);
  for (let i = 0; i < 3; i++) for (const a of apis) expect((await call(a.url, key, '/v1/brands')).status).toBe(200);
  // Made on a worker: the APIs hear the changes of every node.
  await adminOn(db.workerUrls[0]!, 'account', 'suspend', '--account', account);
  const ms = await untilAll(403, (url) => call(url, key, '/v1/brands'));
  console.log(JSON.stringify({ change: 'account suspend', ms: Math.round(ms) }));
});

test('an attribute added with the admin CLI on the other worker is accepted by both APIs within a second', async () => {
  const { id: account } = await admin('account', 'create', '--name', 'Schema');
  const { key } = await admin('key', 'create', '--account', account);
  const contact = (n: number) => ({ email: `c${n}-${crypto.randomUUID()}@example.com`, attributes: { tier: 'gold' } });
  // Unknown before: a 400 from both, with the schema cached.
  for (let i = 0; i < 3; i++)
    for (const a of apis) expect((await call(a.url, key, '/v1/contacts', contact(i))).status).toBe(400);
  await adminOn(db.workerUrls[1]!, 'attribute', 'create', '--account', account, '--name', 'tier', '--type', 'string');
  let n = 100;
  const ms = await untilAll(201, (url) => call(url, key, '/v1/contacts', contact(n++)));
  console.log(JSON.stringify({ change: 'attribute create', ms: Math.round(ms) }));
});

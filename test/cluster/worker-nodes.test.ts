/**
 * The service connected to a Citus worker node (docs/scaling-out.md). API replicas may be: the
 * record of migrations and their DDL are the coordinator's, so `migrate` there applies nothing and
 * checks the coordinator's record instead, refusing clearly when it lacks a file of this version.
 * The worker process may not: it refuses to start, saying where to connect.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import { connect, type Sql } from '../../src/db';
import { migrate, MigrationError } from '../../src/migrate';
import { createTestDatabase, type TestDatabase } from '../helpers/db';

let db: TestDatabase;
let worker: Sql;

beforeAll(async () => {
  db = await createTestDatabase();
  const [url] = db.workerUrls;
  if (!url) throw new Error('test/cluster/ runs on a Citus cluster: CITUS_WORKERS=2 bun test/run.ts test/cluster');
  worker = connect(url, 2);
});

afterAll(async () => {
  await worker?.end({ timeout: 2 });
  await db?.drop();
});

test('on a worker of a migrated cluster, migrate applies nothing and succeeds', async () => {
  expect(await migrate(worker)).toEqual([]);
  // Nothing of the record was made on the worker.
  const [own] = await worker`select to_regclass('public.schema_migrations') is not null as exists`;
  expect(own!.exists).toBe(false);
});

test('on a worker, a file the coordinator lacks is refused with what to do, and nothing is applied', async () => {
  const [last] = await db.sql<{ version: string }[]>`
    delete from schema_migrations where version = (select max(version) from schema_migrations) returning version`;
  try {
    const error = await migrate(worker).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toContain(`the coordinator lacks ${last!.version}`);
    expect((error as Error).message).toContain('migrate through the coordinator first');
  } finally {
    await db.sql`insert into schema_migrations (version, checksum) values (${last!.version}, 'restored')`;
  }
});

test('the worker process connected to a worker node exits at start, saying to use the coordinator', async () => {
  const root = join(import.meta.dir, '../..');
  const proc = Bun.spawn([join(root, 'node_modules/.bin/bun'), 'worker/index.ts'], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: db.workerUrls[0]!,
      REDIS_URL: db.redisUrl,
      STORAGE_DRIVER: 'local',
      STORAGE_DIR: '/tmp/worker-nodes-test-objects',
      WORKER_METRICS_PORT: '0',
    },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const killer = setTimeout(() => proc.kill('SIGKILL'), 30_000);
  const [code, out, err] = await Promise.all([
    proc.exited,
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
  ]);
  clearTimeout(killer);
  expect(code).toBe(1);
  expect(out + err).toContain('the worker connects to the coordinator of a Citus cluster, not to one of its workers');
});

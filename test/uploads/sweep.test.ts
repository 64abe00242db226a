// The upload-sweep job (DESIGN: processes, object store; spec: awaiting-upload → failed after 24 hours):
// S3 arrivals, the 24-hour failure, and re-enqueueing open imports whose job Redis lost. Runs against
// the test database and a real Redis, with a BullMQ prefix of its own.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UnrecoverableError, Worker } from 'bullmq';
// @ts-expect-error s3rver ships no type declarations
import S3rver from 's3rver';
import { loadConfig } from '../../src/config';
import { createImportQueue, redisConnection, type BullImportQueue } from '../../src/imports/bullmq-queue';
import { IMPORT_QUEUE } from '../../src/imports/jobs';
import { toImport } from '../../src/imports/view';
import { createStore, importObjectKey, type ObjectStore } from '../../src/storage';
import { NO_FILE_REASON } from '../../src/imports/lifecycle';
import { sweep } from '../../worker/sweep';
import { testApp, type TestApp } from '../helpers/app';
import { createAccount } from '../helpers/fixtures';

const PREFIX = `test-sweep-${crypto.randomUUID().slice(0, 8)}`;
let t: TestApp;
let dir: string;
let server: S3rver;
let storage: ObjectStore;
let queue: BullImportQueue;
let s3Env: Record<string, string>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sweep-'));
  server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: join(dir, 's3'),
    configureBuckets: [{ name: 'imports', configs: [] }],
  });
  const { port } = (await server.run()) as unknown as { port: number };
  s3Env = {
    S3_BUCKET: 'imports',
    S3_ENDPOINT: `http://127.0.0.1:${port}`,
    S3_ACCESS_KEY_ID: 'S3RVER',
    S3_SECRET_ACCESS_KEY: 'S3RVER',
  };
  const env = { DATA_DIR: dir, ...s3Env };
  storage = await createStore(loadConfig(env));
  t = await testApp({ storage }, env);
  queue = createImportQueue(t.db.redisUrl, { prefix: PREFIX });
});
afterAll(async () => {
  await queue.queue.obliterate({ force: true });
  await queue.close();
  await t.close();
  await server.close();
  await rm(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  await t.db.sql`delete from contact_imports`;
  await queue.queue.obliterate({ force: true });
});

const run = () => sweep({ sql: t.db.sql, storage, queue, eventRetentionDays: 7 });

/** An import of its own account (one open import per account), `hoursAgo` old. */
async function insert(status: string, hoursAgo: number, accountId?: string): Promise<string> {
  const account = accountId ?? (await createAccount(t.db.sql));
  const [row] = await t.db.sql<{ id: string }[]>`
    insert into contact_imports (account_id, status, method, columns, duplicate_contact_strategy, updated_count,
                                 skipped_count, created_at)
    values (${account}, ${status}, 'api', '{Email}', 'skip', 0, 0, now() - ${hoursAgo} * interval '1 hour')
    returning id`;
  return row!.id;
}

async function statusOf(id: string) {
  const [row] = await t.db.sql`select * from contact_imports where id = ${id}`;
  return row!;
}

describe('24 hours without a file', () => {
  test('an import awaiting its upload 24 hours after creation fails with a reason; younger ones stay', async () => {
    const old = await insert('awaiting-upload', 24.01);
    const young = await insert('awaiting-upload', 23.9);
    const uploadedLongAgo = await insert('uploaded', 30);
    const result = await run();
    expect(result.expired).toEqual([old]);
    const row = await statusOf(old);
    expect(row.status).toBe('failed');
    const shown = toImport(row as never, 'http://localhost');
    expect(shown).toMatchObject({ status: 'failed', failureReason: NO_FILE_REASON });
    expect(NO_FILE_REASON).toBe('No file arrived within 24 hours of creation.');
    expect((await statusOf(young)).status).toBe('awaiting-upload');
    expect((await statusOf(uploadedLongAgo)).status).toBe('uploaded');
    expect((await run()).expired).toEqual([]);
  });

  test('the failed import no longer blocks a new one', async () => {
    await insert('awaiting-upload', 25, t.accountId);
    expect(
      (await t.call('POST', '/v1/contact-imports', { body: { columns: ['Email'], duplicateContactStrategy: 'skip' } }))
        .status,
    ).toBe(409);
    await run();
    expect(
      (await t.call('POST', '/v1/contact-imports', { body: { columns: ['Email'], duplicateContactStrategy: 'skip' } }))
        .status,
    ).toBe(201);
  });
});

describe('S3 arrivals', () => {
  async function createImport(): Promise<{ id: string; uploadUrl: string }> {
    const res = await t.call('POST', '/v1/contact-imports', {
      body: { columns: ['Email'], duplicateContactStrategy: 'skip' },
    });
    expect(res.status).toBe(201);
    return res.body;
  }

  test('a file PUT to the presigned link is found by the sweep: uploaded with ETag and size, enqueued', async () => {
    const { id, uploadUrl } = await createImport();
    expect(uploadUrl).toContain('X-Amz-Signature=');
    expect((await run()).arrived).toEqual([]);
    expect((await statusOf(id)).status).toBe('awaiting-upload');
    const csv = 'Email\ns3@example.com\n';
    expect((await fetch(uploadUrl, { method: 'PUT', body: csv })).status).toBe(200);

    expect((await run()).arrived).toEqual([id]);
    const r = await statusOf(id);
    expect(r.status).toBe('uploaded');
    expect(r.object_key).toBe(importObjectKey(t.accountId, id));
    expect(r.object_etag).toBeNull(); // pinned by the worker at its start: a second PUT may still come
    expect((await storage.head(r.object_key))?.size).toBe(csv.length);
    expect(r.object_size).toBe(csv.length);
    const job = await queue.queue.getJob(id);
    expect(job?.data).toEqual({ accountId: t.accountId, importId: id });
    expect((await run()).arrived).toEqual([]);
  });

  test('a file arriving after the 24 hours is not imported: the import fails and the object is dropped', async () => {
    const { id, uploadUrl } = await createImport();
    expect((await fetch(uploadUrl, { method: 'PUT', body: 'Email\nlate@example.com\n' })).status).toBe(200);
    await t.db.sql`update contact_imports set created_at = now() - interval '25 hours' where id = ${id}`;
    const result = await run();
    expect(result.arrived).toEqual([]);
    expect(result.expired).toEqual([id]);
    expect(await storage.head(importObjectKey(t.accountId, id))).toBeUndefined();
    expect(await queue.queue.getJob(id)).toBeUndefined();
  });

  test('the local driver needs no arrival sweep (its upload handler marks the import)', async () => {
    const local = await createStore(loadConfig({ DATA_DIR: dir, STORAGE_DIR: join(dir, 'objects') }));
    await insert('awaiting-upload', 1);
    expect((await sweep({ sql: t.db.sql, storage: local, queue, eventRetentionDays: 7 })).arrived).toEqual([]);
  });
});

describe('re-enqueueing open imports Redis lost', () => {
  test('uploaded and importing imports without a job get one; the next sweep finds them live', async () => {
    const uploaded = await insert('uploaded', 1);
    const importing = await insert('importing', 1);
    await insert('success', 1);
    await insert('failed', 1);
    expect((await run()).requeued.sort()).toEqual([uploaded, importing].sort());
    for (const id of [uploaded, importing])
      expect((await queue.queue.getJob(id))?.data).toEqual({
        accountId: (await statusOf(id)).account_id,
        importId: id,
      });
    expect(await queue.queue.getJobCounts('wait')).toEqual({ wait: 2 });
    expect((await run()).requeued).toEqual([]);
  });

  test('a job that failed for good or completed while Postgres says open is replaced', async () => {
    const failedJob = await insert('importing', 1);
    const completedJob = await insert('uploaded', 1);
    await queue.enqueueImport((await statusOf(failedJob)).account_id, failedJob);
    await queue.enqueueImport((await statusOf(completedJob)).account_id, completedJob);
    const worker = new Worker(
      IMPORT_QUEUE,
      async (job) => {
        if (job.id === failedJob) throw new UnrecoverableError('gave up');
      },
      { connection: redisConnection(t.db.redisUrl), prefix: PREFIX },
    );
    try {
      await waitFor(
        async () =>
          (await queue.queue.getJobCounts('failed', 'completed')).failed === 1 &&
          (await queue.queue.getJobCounts('completed')).completed === 1,
      );
    } finally {
      await worker.close();
    }
    expect((await run()).requeued.sort()).toEqual([failedJob, completedJob].sort());
    expect(await (await queue.queue.getJob(failedJob))!.getState()).toBe('waiting');
    expect(await (await queue.queue.getJob(completedJob))!.getState()).toBe('waiting');
  });

  test('an import that finished between the two reads is left alone', async () => {
    const id = await insert('importing', 1);
    expect(await queue.ensureImport(t.accountId, id, async () => false)).toBe('closed');
    expect(await queue.queue.getJob(id)).toBeUndefined();
  });

  test('enqueueing twice adds one job (the job id is the import id)', async () => {
    const id = await insert('uploaded', 1);
    await queue.enqueueImport(t.accountId, id);
    await queue.enqueueImport(t.accountId, id);
    expect(await queue.queue.getJobCounts('wait')).toEqual({ wait: 1 });
    expect(await queue.ping()).toBe('PONG');
  });
});

describe('schema-change holds without an owner', () => {
  test(
    'a hold a minute past its estimate (its admin CLI died mid-change) is removed, ' +
      'and writes are taken again; a live one stays',
    async () => {
      const accountId = await createAccount(t.db.sql);
      const [stale] = await t.db.sql<{ id: string }[]>`
      insert into bulk_operations (account_id, id, kind, estimated_end)
      values (${accountId}, gen_random_uuid(), 'schema-change', now() - interval '2 minutes') returning id`;
      const [live] = await t.db.sql<{ id: string }[]>`
      insert into bulk_operations (account_id, id, kind, estimated_end)
      values (${accountId}, gen_random_uuid(), 'schema-change', now() + interval '5 seconds') returning id`;
      const [importing] = await t.db.sql<{ id: string }[]>`
      insert into bulk_operations (account_id, id, kind, estimated_end)
      values (${accountId}, gen_random_uuid(), 'contact-import', now() - interval '2 minutes') returning id`;
      expect((await run()).released).toEqual([stale!.id]);
      const left = await t.db.sql<
        { id: string }[]
      >`select id from bulk_operations where account_id = ${accountId} order by id`;
      expect(left.map((r) => r.id).sort()).toEqual([live!.id, importing!.id].sort());
      await t.db.sql`delete from bulk_operations where account_id = ${accountId}`;
    },
  );
});

describe('the worker process', () => {
  test('S3 end to end: PUT to the link, the sweep notices, the import runs to success; SIGTERM exits 0', async () => {
    // A Redis database of its own: the worker uses BullMQ's default prefix.
    const redis = new URL(t.db.redisUrl);
    redis.pathname = '/7';
    const worker = Bun.spawn([process.execPath, 'worker/index.ts'], {
      cwd: join(import.meta.dir, '../..'),
      env: {
        ...process.env,
        ...s3Env,
        DATABASE_URL: t.db.url,
        REDIS_URL: redis.toString(),
        DATA_DIR: dir,
        LOG_LEVEL: 'warn',
      },
      stdout: 'ignore',
      stderr: 'inherit',
    });
    try {
      const res = await t.call('POST', '/v1/contact-imports', {
        body: { columns: ['Email'], duplicateContactStrategy: 'skip' },
      });
      expect(res.status).toBe(201);
      expect((await fetch(res.body.uploadUrl, { method: 'PUT', body: 'Email\nworker@example.com\n' })).status).toBe(
        200,
      );
      await waitFor(async () => (await statusOf(res.body.id)).status === 'success', 30_000);
      expect((await t.call('GET', `/v1/contact-imports/${res.body.id}`)).body).toMatchObject({
        status: 'success',
        addedCount: 1,
      });
    } finally {
      worker.kill('SIGTERM');
    }
    expect(await worker.exited).toBe(0);
    const cleanup = createImportQueue(redis.toString());
    await cleanup.queue.obliterate({ force: true });
    await cleanup.close();
  }, 60_000);
});

async function waitFor(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await Bun.sleep(25);
  }
}

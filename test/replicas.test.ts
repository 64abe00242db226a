/**
 * Several replicas as one service (issue 14, build item 5): two API processes and two worker processes,
 * all from the real entry points, on one private PostgreSQL, one Redis and one S3-protocol server (the
 * `s3` driver against s3rver). Four accounts import at once, each through one of the two APIs and the
 * presigned S3 link; the workers' sweep notices the files. Every import must end like an uninterrupted
 * in-process run of its file; the one-open-import rule must hold when both APIs are asked at the same
 * moment; each import must run in exactly one worker; the sweep must run once per interval, not once
 * per worker; and a worker killed mid-merge must have its import finished by the other.
 *
 * The tests run in order and share the stack: the sweep's window starts when both workers are up
 * and ends before the last test kills one of them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { markImportFailed } from '../src/imports/lifecycle';
import { SWEEP_EVERY_MS, SWEEP_QUEUE, IMPORT_QUEUE, SWEEP_SCHEDULER_ID } from '../src/imports/jobs';
import { faultBed, type Child, type FaultBed } from './helpers/fault-bed';
import { midPhase, outcome, RESUME_WITHIN_MS, runningOn, type Outcome } from './helpers/fault-import';
import { createAccount, createKey } from './helpers/fixtures';
import {
  createBody,
  expectedCounts,
  isPipelineLine,
  logLines,
  queueEvents,
  redisNow,
  referenceOutcome,
  replicaAccount,
  replicaCsv,
  sampleRunLocks,
  schedulerIds,
  startS3,
  type FileSpec,
  type LockSamples,
  type LogLine,
  type S3Server,
} from './helpers/replicas';

/** Several merge batches per file; two imports per worker at once, so four run on two workers. */
const BATCH = 250;
const ENV = { IMPORT_BATCH_SIZE: String(BATCH), WORKER_CONCURRENCY: '2', LOG_LEVEL: 'info' };
const FILES: FileSpec[] = [
  { seed: 1, rows: 6_000, strategy: 'overwrite', restoreDisabled: true },
  { seed: 2, rows: 6_000, strategy: 'keep', restoreDisabled: false },
  { seed: 3, rows: 6_000, strategy: 'skip', restoreDisabled: true },
  { seed: 4, rows: 6_000, strategy: 'overwrite', restoreDisabled: false },
];
/** The import whose worker is killed: long enough (about 100 merge batches) to be caught mid-merge. */
const KILLED: FileSpec = { seed: 5, rows: 30_000, strategy: 'overwrite', restoreDisabled: true };
/** The sweep is counted over at least this long with both workers up. */
const SWEEP_WINDOW_MS = 30_000;

let s3: S3Server | undefined;
let bed: FaultBed | undefined;
let apis: Child[] = [];
let workers: Child[] = [];
const references: Outcome[] = [];
let killedReference: Outcome;
/** Redis's clock when both workers had said they started: the sweep's window opens here. */
let bothUpAt = 0;
const samplers: LockSamples[] = [];
/** The four concurrent imports, filled by the first test and read by the ones after it. */
const runs: { accountId: string; key: string; importId: string; api: string; uploadUrl: string }[] = [];
let concurrentSamples: LockSamples | undefined;

const workerNamed = (name: string) => workers.find((w) => w.name === name)!;
/** The fault bed names children `worker-0`, `worker-1`; APP_NAME (their PostgreSQL application_name) is the same. */
const appNames = () => workers.map((w) => w.name);

beforeAll(async () => {
  s3 = await startS3();
  bed = await faultBed({ ...s3.env, ...ENV });
  // Before any worker runs: the reference imports are `uploaded` rows whose files the workers' S3 store
  // does not have, and a sweep would enqueue them.
  for (const f of FILES) references.push(await referenceOutcome(bed.databaseUrl, f, BATCH));
  killedReference = await referenceOutcome(bed.databaseUrl, KILLED, BATCH);
  for (const [i, r] of [...references, killedReference].entries())
    expect(r).toMatchObject({ status: 'success', failureReason: null, ...counts([...FILES, KILLED][i]!) });

  // One after the other: the bed names a child by how many of its role it has started.
  apis = [await bed.start('api', { APP_NAME: 'api-0' }), await bed.start('api', { APP_NAME: 'api-1' })];
  workers = [await bed.start('worker', { APP_NAME: 'worker-0' }), await bed.start('worker', { APP_NAME: 'worker-1' })];
  // Every child on the s3 driver, from the real entry points (src/index.ts, worker/index.ts).
  for (const a of apis) expect((await waitForLog(a, (l) => l.msg === 'api listening')).storage).toBe('s3');
  for (const w of workers) expect((await waitForLog(w, (l) => l.msg === 'worker started')).storage).toBe('s3');
  bothUpAt = await redisNow(bed.redisUrl);
}, 120_000);

afterAll(async () => {
  for (const s of samplers) await s.stop();
  // To read the children's logs after a run: REPLICAS_LOG_DIR=/some/dir.
  const keep = process.env.REPLICAS_LOG_DIR;
  if (keep) for (const c of [...apis, ...workers]) await copyFile(c.log, join(keep, `${c.name}.log`)).catch(() => {});
  await bed?.stop();
  await s3?.close();
});

/** The counts a file's import must report, from how the file was made. */
function counts(f: FileSpec) {
  const e = expectedCounts(f);
  return {
    rowCount: e.rowCount,
    addedCount: e.addedCount,
    malformedCount: e.malformedCount,
    duplicateInFileCount: e.duplicateInFileCount,
  };
}

function sampler(): LockSamples {
  const s = sampleRunLocks(bed!.sql);
  samplers.push(s);
  return s;
}

async function waitForLog(child: Child, match: (l: LogLine) => boolean, ms = 30_000): Promise<LogLine> {
  const end = Date.now() + ms;
  for (;;) {
    const found = (await logLines(child.log)).find(match);
    if (found) return found;
    if (Date.now() > end) throw new Error(`${child.name} did not log the line in ${ms} ms:\n${await bed!.tail(child)}`);
    await Bun.sleep(100);
  }
}

async function call(api: Child, key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

/** Resolves just after a sweep completes, so the next one is a whole interval away. */
async function afterASweep(): Promise<void> {
  const since = await redisNow(bed!.redisUrl);
  const end = Date.now() + 3 * SWEEP_EVERY_MS;
  while (Date.now() < end) {
    const done = (await queueEvents(bed!.redisUrl, SWEEP_QUEUE, since)).some((e) => e.event === 'completed');
    if (done) return;
    await Bun.sleep(20);
  }
  throw new Error('no upload sweep completed within three intervals');
}

/** Each worker's pipeline lines (`import read`, `import merge batch`, …) of one import. */
async function pipelineLinesOf(importId: string): Promise<Map<string, LogLine[]>> {
  const byWorker = new Map<string, LogLine[]>();
  for (const w of workers) {
    const lines = (await logLines(w.log)).filter((l) => isPipelineLine(l) && l.importId === importId);
    if (lines.length) byWorker.set(w.name, lines);
  }
  return byWorker;
}

async function importTimes(importId: string) {
  const [row] = await bed!.sql<{ startedAt: Date; completedAt: Date; attempts: number }[]>`
    select started_at as "startedAt", completed_at as "completedAt", attempts
    from contact_imports where id = ${importId}`;
  return row!;
}

describe('two APIs and two workers on one PostgreSQL, Redis and S3 bucket', () => {
  test('four accounts import at once, uploads through either API: all four run together, each exact', async () => {
    concurrentSamples = sampler();
    const accounts = await Promise.all(FILES.map((f) => replicaAccount(bed!.sql, f)));
    for (const [i, f] of FILES.entries()) {
      const api = apis[i % 2]!;
      const res = await call(api, accounts[i]!.key, 'POST', '/v1/contact-imports', createBody(f));
      expect(res.status).toBe(201);
      expect(res.body.status).toBe('awaiting-upload');
      expect(res.body.uploadUrl).toStartWith(`${s3!.env.S3_ENDPOINT}/imports/contact-imports/`);
      expect(res.body.uploadUrl).toContain('X-Amz-Signature=');
      runs.push({ ...accounts[i]!, importId: res.body.id, api: api.name, uploadUrl: res.body.uploadUrl });
    }
    // Every file in S3 before the next sweep: the sweep finds all four in one pass and enqueues them together.
    await afterASweep();
    const puts = await Promise.all(
      runs.map((r, i) => fetch(r.uploadUrl, { method: 'PUT', body: replicaCsv(FILES[i]!) })),
    );
    expect(puts.map((p) => p.status)).toEqual([200, 200, 200, 200]);

    const got = await Promise.all(runs.map((r) => outcome(bed!.sql, r.accountId, r.importId, 60_000)));
    await concurrentSamples.stop();
    for (const [i, r] of runs.entries()) {
      expect(got[i]).toEqual(references[i]!);
      // What a client sees through the API that did not create the import.
      const other = apis.find((a) => a.name !== r.api)!;
      const view = await call(other, r.key, 'GET', `/v1/contact-imports/${r.importId}`);
      expect(view.status).toBe(200);
      const e = expectedCounts(FILES[i]!);
      expect(view.body).toMatchObject({ status: 'success', ...counts(FILES[i]!) });
      expect(view.body.updatedCount + view.body.skippedCount).toBe(e.existing);
    }

    // All four ran at the same time: the last start came before the first end.
    const times = await Promise.all(runs.map((r) => importTimes(r.importId)));
    const lastStart = Math.max(...times.map((t) => t.startedAt.getTime()));
    const firstEnd = Math.min(...times.map((t) => t.completedAt.getTime()));
    console.log(
      JSON.stringify({
        replicas: 'four imports',
        api: runs.map((r) => r.api),
        contacts: got.map((g) => g.contacts.count),
        equalToReference: got.map((g, i) => JSON.stringify(g) === JSON.stringify(references[i])),
        overlapMs: firstEnd - lastStart,
        runMs: times.map((t) => t.completedAt.getTime() - t.startedAt.getTime()),
        peak: concurrentSamples.peak,
        lockSamples: concurrentSamples.samples,
      }),
    );
    expect(lastStart).toBeLessThan(firstEnd);
  }, 90_000);

  test('one open import per account across replicas: both APIs asked at once, one 201 and the rest 409', async () => {
    const accountId = await createAccount(bed!.sql, 'replicas race');
    const key = await createKey(bed!.sql, accountId);
    const ROUNDS = 6;
    const PER_API = 3;
    const winners: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const asked = Array.from({ length: 2 * PER_API }, (_, i) => apis[i % 2]!);
      const answers = await Promise.all(
        asked.map((api) =>
          call(api, key, 'POST', '/v1/contact-imports', { columns: ['Email'], duplicateContactStrategy: 'skip' }),
        ),
      );
      const created = answers.filter((a) => a.status === 201);
      const refused = answers.filter((a) => a.status === 409);
      expect(answers.map((a) => a.status).sort()).toEqual([201, ...Array(2 * PER_API - 1).fill(409)]);
      for (const r of refused) {
        expect(r.body.code).toBe('operation_in_progress');
        expect(r.headers.get('content-type')).toStartWith('application/problem+json');
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(r.body.detail).toContain(created[0]!.body.id);
      }
      const open = await bed!.sql<{ id: string }[]>`
        select id from contact_imports
        where account_id = ${accountId} and status in ('awaiting-upload', 'uploaded', 'importing')`;
      expect(open.map((o) => o.id)).toEqual([created[0]!.body.id]);
      winners.push(asked[answers.indexOf(created[0]!)]!.name);
      // Closed, so the next round competes again.
      await markImportFailed(bed!.sql, accountId, created[0]!.body.id, 'closed by the replicas test');
    }
    const [all] = await bed!.sql<{ n: number; open: number }[]>`
      select count(*)::int as n,
             count(*) filter (where status in ('awaiting-upload', 'uploaded', 'importing'))::int as open
      from contact_imports where account_id = ${accountId}`;
    console.log(
      JSON.stringify({ replicas: 'one open import', rounds: ROUNDS, requestsPerRound: 2 * PER_API, winners }),
    );
    expect(all).toEqual({ n: ROUNDS, open: 0 });
  }, 30_000);

  test('each of the four imports ran in exactly one worker, read once, delivered once', async () => {
    expect(runs).toHaveLength(4);
    const events = await queueEvents(bed!.redisUrl, IMPORT_QUEUE, bothUpAt);
    const ranIn: string[] = [];
    const evidence = [];
    for (const r of runs) {
      const lines = await pipelineLinesOf(r.importId);
      expect([...lines.keys()]).toHaveLength(1);
      const [worker, own] = [...lines.entries()][0]!;
      ranIn.push(worker);
      // The whole pipeline in that one worker: read once, deduplicated, merged, finished.
      const msgs = own.map((l) => l.msg);
      expect(msgs.filter((m) => m === 'import read')).toHaveLength(1);
      expect(msgs.filter((m) => m === 'import finished')).toHaveLength(1);
      expect(msgs).toContain('import deduplicated');
      expect(msgs).toContain('import merged');
      // The session lock was only ever seen held by that worker.
      expect([...(concurrentSamples!.holders.get(r.importId) ?? [])]).toEqual([worker]);
      expect((await importTimes(r.importId)).attempts).toBe(1);
      const mine = events.filter((e) => e.jobId === r.importId);
      const taken = mine.filter((e) => e.event === 'active').length;
      expect(taken).toBe(1);
      expect(mine.filter((e) => e.event === 'completed')).toHaveLength(1);
      expect(mine.filter((e) => e.event === 'stalled' || e.event === 'failed')).toHaveLength(0);
      evidence.push({
        importId: r.importId,
        worker,
        lines: own.length,
        mergeBatches: count(msgs, 'import merge batch'),
      });
    }
    console.log(JSON.stringify({ replicas: 'one worker per import', evidence, peak: concurrentSamples!.peak }));
    // Both workers took two of the four (each runs two at once).
    expect(ranIn.sort()).toEqual([...appNames(), ...appNames()].sort());

    // The sweep (whichever worker ran it) took each file once, all four in one pass.
    const sweepLines = (await Promise.all(workers.map((w) => logLines(w.log)))).flat();
    const uploaded = sweepLines.filter((l) => l.msg === 'contact import uploaded');
    expect(runs.map((r) => uploaded.filter((l) => l.importId === r.importId).length)).toEqual([1, 1, 1, 1]);
    const passes = sweepLines.filter((l) => l.msg === 'upload sweep' && (l.arrived as string[]).length > 0);
    expect(passes.map((l) => [...(l.arrived as string[])].sort())).toEqual([runs.map((r) => r.importId).sort()]);
  });

  test(
    'the upload sweep runs once per interval with both workers up, not once per worker',
    async () => {
      const now = await redisNow(bed!.redisUrl);
      if (now - bothUpAt < SWEEP_WINDOW_MS) await Bun.sleep(SWEEP_WINDOW_MS - (now - bothUpAt));
      const until = await redisNow(bed!.redisUrl);
      const events = (await queueEvents(bed!.redisUrl, SWEEP_QUEUE, bothUpAt, until)).filter((e) =>
        e.jobId.startsWith(`repeat:${SWEEP_SCHEDULER_ID}:`),
      );
      const completed = events.filter((e) => e.event === 'completed');
      const taken = events.filter((e) => e.event === 'active');
      const schedulers = await schedulerIds(bed!.redisUrl, SWEEP_QUEUE);
      const slots = completed.map((e) => Number(e.jobId.split(':').at(-1)));
      const windowMs = until - bothUpAt;
      const gaps = slots.slice(1).map((s, i) => s - slots[i]!);
      const completionGaps = completed.slice(1).map((e, i) => e.at - completed[i]!.at);
      console.log(
        JSON.stringify({
          replicas: 'sweep',
          schedulers,
          windowMs,
          intervalMs: SWEEP_EVERY_MS,
          expected: windowMs / SWEEP_EVERY_MS,
          completed: completed.length,
          taken: taken.length,
          slotGaps: [...new Set(gaps)],
          minCompletionGapMs: Math.min(...completionGaps),
        }),
      );
      // One scheduler for both workers; one sweep per interval (give or take the window's two ends), each
      // taken once, one job per slot.
      expect(schedulers).toEqual([SWEEP_SCHEDULER_ID]);
      expect(Math.abs(completed.length - windowMs / SWEEP_EVERY_MS)).toBeLessThanOrEqual(1.5);
      expect(new Set(completed.map((e) => e.jobId)).size).toBe(completed.length);
      expect(taken.length).toBeLessThanOrEqual(completed.length + 1);
      expect(new Set(gaps)).toEqual(new Set([SWEEP_EVERY_MS]));
      expect(Math.min(...completionGaps)).toBeGreaterThan(SWEEP_EVERY_MS / 2);
    },
    SWEEP_WINDOW_MS + 15_000,
  );

  test('a worker killed mid-merge: the other worker finishes its import, exact like the reference', async () => {
    const locks = sampler();
    const { accountId, key } = await replicaAccount(bed!.sql, KILLED);
    const created = await call(apis[1]!, key, 'POST', '/v1/contact-imports', createBody(KILLED));
    expect(created.status).toBe(201);
    const importId: string = created.body.id;
    expect((await fetch(created.body.uploadUrl, { method: 'PUT', body: replicaCsv(KILLED) })).status).toBe(200);

    const at = await midPhase(bed!.sql, importId, 'merge');
    const holder = await runningOn(bed!.sql, importId);
    expect(appNames()).toContain(holder!);
    const victim = workerNamed(holder!);
    const survivor = workers.find((w) => w !== victim)!;
    await bed!.kill(victim);
    const killedAt = Date.now();

    const got = await outcome(bed!.sql, accountId, importId, 90_000);
    await locks.stop();
    expect(got).toEqual(killedReference);

    const lines = await pipelineLinesOf(importId);
    const before = lines.get(victim.name) ?? [];
    const after = lines.get(survivor.name) ?? [];
    const batches = [...before, ...after]
      .filter((l) => l.msg === 'import merge batch')
      .map((l) => Number(l.checkpoint));
    const resumedMs = after.length ? Date.parse(after[0]!.time) - killedAt : NaN;
    const events = (await queueEvents(bed!.redisUrl, IMPORT_QUEUE)).filter((e) => e.jobId === importId);
    console.log(
      JSON.stringify({
        replicas: 'worker killed mid-merge',
        checkpointAtKill: at.checkpoint,
        rowCount: at.rowCount,
        victim: victim.name,
        survivor: survivor.name,
        victimLines: before.length,
        survivorLines: after.length,
        resumedMs,
        attempts: (await importTimes(importId)).attempts,
        lockHolders: [...(locks.holders.get(importId) ?? [])],
        jobEvents: events.map((e) => e.event),
        equalToReference: JSON.stringify(got) === JSON.stringify(killedReference),
      }),
    );
    // Read and begun in the victim, taken over and finished in the survivor, never in both at once.
    expect(before.map((l) => l.msg)).toContain('import read');
    // The survivor went on with the victim's staged rows: the file was read once, by one worker.
    const msgs = [...before, ...after].map((l) => l.msg);
    expect(count(msgs, 'import read')).toBe(1);
    expect((await importTimes(importId)).attempts).toBe(1);
    expect(before.every((l) => Date.parse(l.time) <= killedAt)).toBe(true);
    expect(after.every((l) => Date.parse(l.time) > killedAt)).toBe(true);
    expect(after.map((l) => l.msg)).toContain('import finished');
    expect(resumedMs).toBeLessThan(RESUME_WITHIN_MS);
    expect([...(locks.holders.get(importId) ?? [])].sort()).toEqual([victim.name, survivor.name].sort());
    // The survivor went on from the victim's checkpoint: no batch merged twice, none skipped.
    expect(batches).toEqual([...batches].sort((a, b) => a - b));
    expect(new Set(batches).size).toBe(batches.length);
    expect(batches.at(-1)).toBe(killedReference.rowCount as number);
  }, 120_000);
});

function count(xs: string[], x: string): number {
  return xs.filter((y) => y === x).length;
}

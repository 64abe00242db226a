/**
 * What test/replicas.test.ts needs beyond the fault bed: an S3-protocol server (s3rver) the API and
 * worker children reach through the `s3` driver, deterministic files with the counts they must give,
 * accounts with contacts already stored, an uninterrupted in-process reference run, a sampler of
 * which worker holds each import's session lock, the children's JSON log lines, and the BullMQ event
 * streams in Redis (every job a worker took, completed or saw stall).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import IORedis from 'ioredis';
// @ts-expect-error s3rver ships no type declarations
import S3rver from 's3rver';
import { connect, type Sql } from '../../src/db';
import { LocalStore } from '../../src/storage/local';
import { UploadTokens } from '../../src/storage/upload-token';
import { runImport } from '../../worker/import/index';
import { outcome, type Outcome } from './fault-import';
import { stageImport, testConfig } from './file-store';
import { createAccount, createAttribute, createKey } from './fixtures';

export interface S3Server {
  /** What a child needs to use the `s3` driver against this server. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** s3rver on a free port with one bucket, as test/storage/storage-s3.test.ts starts it. */
export async function startS3(): Promise<S3Server> {
  const dir = await mkdtemp(join(tmpdir(), 'replicas-s3-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: dir,
    configureBuckets: [{ name: 'imports', configs: [] }],
  });
  const { port } = (await server.run()) as unknown as { port: number };
  return {
    env: {
      STORAGE_DRIVER: 's3',
      S3_BUCKET: 'imports',
      S3_ENDPOINT: `http://127.0.0.1:${port}`,
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'S3RVER',
      S3_FORCE_PATH_STYLE: 'true',
    },
    async close() {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** One account's file: its seed makes its addresses, so two files never share a contact. */
export interface FileSpec {
  seed: number;
  rows: number;
  strategy: 'overwrite' | 'keep' | 'skip';
  restoreDisabled: boolean;
}

const email = (seed: number, k: number) => `s${seed}.u${k}@example.com`;
/** Addresses 0 … distinct-1; the rows after them repeat earlier ones. */
const distinctOf = (rows: number) => Math.floor(rows * 0.85);
const isMalformed = (j: number) => j % 97 === 13;
/** Stored before the import: every 5th address of the file, half of them disabled. */
const STORED_EVERY = 5;

export function replicaCsv(f: FileSpec): string {
  const lines = ['Email,n'];
  const distinct = distinctOf(f.rows);
  for (let j = 0; j < f.rows; j++)
    lines.push(isMalformed(j) ? `broken-${f.seed}-${j},1` : `${email(f.seed, j % distinct)},${j}`);
  return `${lines.join('\n')}\n`;
}

/** The counts the file must give, worked out from how it was made (not from any run of it). */
export function expectedCounts(f: FileSpec) {
  const distinct = distinctOf(f.rows);
  const seen = new Set<number>();
  let malformed = 0;
  let valid = 0;
  for (let j = 0; j < f.rows; j++) {
    if (isMalformed(j)) malformed++;
    else {
      valid++;
      seen.add(j % distinct);
    }
  }
  const stored = [...seen].filter((k) => k % STORED_EVERY === 0).length;
  return {
    rowCount: seen.size,
    malformedCount: malformed,
    duplicateInFileCount: valid - seen.size,
    addedCount: seen.size - stored,
    /** updated + skipped: the file's addresses that were stored already */
    existing: stored,
  };
}

/** A fresh account with the `n` attribute, the file's stored contacts and an API key. */
export async function replicaAccount(sql: Sql, f: FileSpec): Promise<{ accountId: string; key: string }> {
  const accountId = await createAccount(sql, `replicas ${f.seed}`);
  await createAttribute(sql, accountId, 'n', 'number');
  await sql`
    insert into contacts (account_id, email_md5, email, attributes, brand_ids, enabled, first_source)
    select ${accountId}, md5(e)::uuid, e, jsonb_build_object('n', -k), '{}', k % 2 = 0, 'api'
    from (select k, ${`s${f.seed}.u`}::text || k || '@example.com' as e
          from generate_series(0, ${distinctOf(f.rows) - 1}, ${STORED_EVERY}) k) stored`;
  return { accountId, key: await createKey(sql, accountId) };
}

/** The body of POST /v1/contact-imports for the file (the reference run stages the same options). */
export const createBody = (f: FileSpec) => ({
  columns: ['Email', 'n'],
  duplicateContactStrategy: f.strategy,
  restoreDisabled: f.restoreDisabled,
});

/**
 * The uninterrupted run every replica run must equal: the file imported into a fresh account with the
 * same stored contacts, by runImport in this process (one run, no queue, no fault), from a local store.
 */
export async function referenceOutcome(databaseUrl: string, f: FileSpec, batchSize: number): Promise<Outcome> {
  const dir = await mkdtemp(join(tmpdir(), 'replicas-ref-'));
  const sql = connect(databaseUrl, 8);
  try {
    const store = new LocalStore(dir, 'http://localhost:0', new UploadTokens(randomBytes(32)));
    const { accountId } = await replicaAccount(sql, f);
    const importId = await stageImport(sql, store, accountId, replicaCsv(f), {
      columns: ['Email', 'n'],
      strategy: f.strategy,
      restoreDisabled: f.restoreDisabled,
    });
    await runImport({ sql, storage: store, config: testConfig(batchSize, dir) }, accountId, importId);
    return await outcome(sql, accountId, importId, 10_000);
  } finally {
    await sql.end({ timeout: 5 });
    await rm(dir, { recursive: true, force: true });
  }
}

/** Who held each import's PostgreSQL session lock (the one a run takes first), sample by sample. */
export interface LockSamples {
  /** importId → the application_names (worker APP_NAMEs) seen holding its run lock */
  holders: Map<string, Set<string>>;
  /** the most imports seen running at one moment, and how many of them each worker held then */
  peak: { running: number; byWorker: Record<string, number> };
  samples: number;
  stop(): Promise<void>;
}

/** Samples pg_locks every `everyMs` until stopped. */
export function sampleRunLocks(sql: Sql, everyMs = 25): LockSamples {
  const s: LockSamples = { holders: new Map(), peak: { running: 0, byWorker: {} }, samples: 0, stop: async () => {} };
  let running = true;
  const loop = (async () => {
    while (running) {
      const rows = await sql<{ importId: string; app: string }[]>`
        select i.id::text as "importId", a.application_name as app
        from contact_imports i
        join pg_locks l on l.locktype = 'advisory' and l.granted and l.objsubid = 1
          and ((l.classid::int8 << 32) | l.objid::int8) = hashtextextended('contact-import:' || lower(i.id::text), 0)
        join pg_stat_activity a on a.pid = l.pid`.catch(() => []);
      s.samples++;
      const byWorker: Record<string, number> = {};
      for (const r of rows) {
        if (!s.holders.has(r.importId)) s.holders.set(r.importId, new Set());
        s.holders.get(r.importId)!.add(r.app);
        byWorker[r.app] = (byWorker[r.app] ?? 0) + 1;
      }
      if (rows.length > s.peak.running) s.peak = { running: rows.length, byWorker };
      await Bun.sleep(everyMs);
    }
  })();
  s.stop = async () => {
    running = false;
    await loop;
  };
  return s;
}

export interface LogLine {
  time: string;
  level: string;
  msg: string;
  importId?: string;
  [field: string]: unknown;
}

/** The JSON lines of a child's log (stdout and stderr), in order; anything else is skipped. */
export async function logLines(path: string): Promise<LogLine[]> {
  const text = await Bun.file(path)
    .text()
    .catch(() => '');
  const lines: LogLine[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(line) as LogLine);
    } catch {
      // a line cut short by SIGKILL
    }
  }
  return lines;
}

/** A run of the import pipeline logs `import …` lines with the importId; the sweep's lines say `contact import …`. */
export const isPipelineLine = (l: LogLine) => typeof l.importId === 'string' && l.msg.startsWith('import ');

export interface QueueEvent {
  /** The stream entry's time (Redis clock, ms). */
  at: number;
  event: string;
  jobId: string;
}

/** BullMQ's event stream of a queue (default `bull` prefix), from `from` to `to` (ms) or all of it. */
export async function queueEvents(redisUrl: string, queue: string, from = 0, to?: number): Promise<QueueEvent[]> {
  const redis = new IORedis(redisUrl, { maxRetriesPerRequest: 3 });
  try {
    const entries = await redis.xrange(`bull:${queue}:events`, String(from), to === undefined ? '+' : String(to));
    return entries.map(([id, fields]) => {
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
      return { at: Number(id.split('-')[0]), event: f.event ?? '', jobId: f.jobId ?? '' };
    });
  } finally {
    redis.disconnect();
  }
}

/** Redis's clock in ms (the event stream's ids are in it). */
export async function redisNow(redisUrl: string): Promise<number> {
  const redis = new IORedis(redisUrl, { maxRetriesPerRequest: 3 });
  try {
    const [s, us] = await redis.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  } finally {
    redis.disconnect();
  }
}

/** The ids of a queue's job schedulers (BullMQ keeps them in the `repeat` sorted set). */
export async function schedulerIds(redisUrl: string, queue: string): Promise<string[]> {
  const redis = new IORedis(redisUrl, { maxRetriesPerRequest: 3 });
  try {
    return await redis.zrange(`bull:${queue}:repeat`, 0, -1);
  } finally {
    redis.disconnect();
  }
}

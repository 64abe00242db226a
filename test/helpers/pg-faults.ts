/**
 * PostgreSQL faults during an import, on a fault bed: a file with repeats, malformed rows and
 * contacts that exist already; holds that keep an import inside one phase (so a fault lands there,
 * whatever the machine's speed); and what an import ended with, to compare with an uninterrupted run.
 */
import { Queue } from 'bullmq';
import { randomBytes } from 'node:crypto';
import type { Sql } from '../../src/db';
import { createImportQueue } from '../../src/imports/bullmq-queue';
import { IMPORT_QUEUE } from '../../src/imports/jobs';
import { LocalStore } from '../../src/storage/local';
import { UploadTokens } from '../../src/storage/upload-token';
import { contactsChecksum, waitForImportEnd, type FaultBed } from './fault-bed';
import { stageImport } from './file-store';
import { createAccount, createAttribute } from './fixtures';

/** 60,000 rows in batches of 2,000: 30 COPY statements and 30 merge batches. */
export const PG_FAULT_ENV = { IMPORT_BATCH_SIZE: '2000' };
export const ROWS = 60_000;

/** The last 10,000 rows repeat earlier addresses; every 997th row is malformed. */
export function pgFaultCsv(): string {
  const lines = ['Email,n'];
  for (let i = 0; i < ROWS; i++) lines.push(i % 997 === 0 ? `broken-${i},1` : `user${i % 50_000}@example.com,${i}`);
  return `${lines.join('\n')}\n`;
}

/** A fresh account holding some of the file's addresses (every other one disabled) and the file staged as `uploaded`. */
export async function stagePgFaultImport(bed: FaultBed, csv: string): Promise<{ accountId: string; importId: string }> {
  const accountId = await createAccount(bed.sql);
  await createAttribute(bed.sql, accountId, 'n', 'number');
  await bed.sql`
    insert into contacts (account_id, email_md5, email, attributes, brand_ids, enabled, first_source)
    select ${accountId}, md5('user' || k || '@example.com')::uuid, 'user' || k || '@example.com',
           jsonb_build_object('n', -k), '{}', k % 2 = 0, 'api'
    from generate_series(0, 20000, 7) k`;
  const store = new LocalStore(bed.storeDir, 'http://localhost:0', new UploadTokens(randomBytes(32)));
  const importId = await stageImport(bed.sql, store, accountId, csv, { columns: ['Email', 'n'], strategy: 'overwrite', restoreDisabled: true });
  return { accountId, importId };
}

export async function enqueueImport(bed: FaultBed, accountId: string, importId: string): Promise<void> {
  const queue = createImportQueue(bed.redisUrl);
  try {
    await queue.enqueueImport(accountId, importId);
  } finally {
    await queue.close();
  }
}

interface State {
  status: string;
  phase: string | null;
  checkpoint: number;
  rowCount: number | null;
  updatedAt: Date;
  /** rows COPYed into staging so far (committed COPY statements) */
  staged: number;
}

export async function importState(sql: Sql, importId: string): Promise<State> {
  const [row] = await sql<Omit<State, 'staged'>[]>`
    select status, phase, checkpoint::int as checkpoint, row_count::int as "rowCount", updated_at as "updatedAt"
    from contact_imports where id = ${importId}::uuid`;
  let staged = 0;
  const [exists] = await sql<{ t: string | null }[]>`select to_regclass(${rowsTable(importId)})::text as t`;
  if (exists?.t) staged = (await sql.unsafe<{ n: number }[]>(`select count(*)::int as n from ${rowsTable(importId)}`))[0]!.n;
  return { ...row!, staged };
}

const hex = (importId: string) => importId.replaceAll('-', '').toLowerCase();
const rowsTable = (importId: string) => `import_rows_${hex(importId)}`;

export async function until<T>(what: string, check: () => Promise<T | undefined | false>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await check().catch(() => undefined);
    if (got) return got;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await Bun.sleep(20);
  }
}

export type Phase = 'read' | 'dedupe' | 'merge';

/**
 * Keeps the import inside `phase` until released (or until the holding session dies with the
 * fault): read waits on a SHARE lock of its staging table (its next COPY), dedupe on an uncommitted
 * table of the name its first merge-table part takes, merge on the account's advisory lock that
 * every batch takes shared. Resolves once the import is held there with work done in the phase.
 */
export async function holdIn(bed: FaultBed, importId: string, accountId: string, phase: Phase): Promise<{ release(): Promise<void> }> {
  const conn = await bed.sql.reserve();
  const release = async () => {
    await conn`rollback`.catch(() => {});
    await conn`select pg_advisory_unlock_all()`.catch(() => {});
    conn.release();
  };
  try {
    if (phase === 'merge') {
      await until('merge under way', async () => {
        const s = await importState(bed.sql, importId);
        return s.phase === 'merge' && s.checkpoint > 0;
      });
      await conn`select pg_advisory_lock(hashtextextended(${accountId}::uuid::text, 0))`;
      const s = await importState(bed.sql, importId);
      if (!(s.status === 'importing' && s.checkpoint < (s.rowCount ?? 0))) throw new Error(`the merge ended before it was held: ${JSON.stringify(s)}`);
    } else {
      // Both start once the read has staged rows: its drop of old staging tables is behind it.
      await until('read under way', async () => {
        const s = await importState(bed.sql, importId);
        return s.phase === 'read' && s.staged > 0;
      });
      await conn`begin`;
      if (phase === 'read') await conn.unsafe(`lock table ${rowsTable(importId)} in share mode`);
      else await conn.unsafe(`create table import_merge_${hex(importId)}_0 (held int)`);
      await until(`${phase} held`, async () => (await importState(bed.sql, importId)).phase === phase);
    }
    // The worker is now waiting on our lock, inside the phase.
    await until(`the worker waiting on the ${phase} hold`, async () => {
      const [w] = await bed.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity where application_name = ${WORKER_APP} and wait_event_type = 'Lock'`;
      return w!.n > 0;
    });
  } catch (e) {
    await release();
    throw e;
  }
  return { release };
}

/** application_name of the worker the PostgreSQL fault tests run. */
export const WORKER_APP = 'pg-fault-worker';

/** Every backend of the worker, terminated at once; returns how many. */
export async function terminateWorkerBackends(sql: Sql): Promise<number> {
  const [r] = await sql<{ n: number }[]>`
    select count(*)::int as n from (
      select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${WORKER_APP}
    ) t`;
  return r!.n;
}

export async function dbNow(sql: Sql): Promise<Date> {
  const [r] = await sql<{ now: Date }[]>`select clock_timestamp() as now`;
  return r!.now;
}

/** Milliseconds from `since` (the database's clock) until the import committed something again, or ended. */
export async function movingAgain(sql: Sql, importId: string, since: Date, ms = 60_000): Promise<number> {
  const s = await until('the import to move again', async () => {
    const now = await importState(sql, importId);
    return now.updatedAt > since || now.status === 'success' || now.status === 'failed' ? now : undefined;
  }, ms);
  return Math.max(0, s.updatedAt.getTime() - since.getTime());
}

/** What an import ended with, and every contact of its account. */
export async function importOutcome(sql: Sql, accountId: string, importId: string, ms = 60_000) {
  const end = await waitForImportEnd(sql, accountId, importId, ms);
  const { status, rowCount, addedCount, updatedCount, skippedCount, malformedCount, duplicateInFileCount, failureReason } = end;
  return { status, rowCount, addedCount, updatedCount, skippedCount, malformedCount, duplicateInFileCount, failureReason, contacts: await contactsChecksum(sql, accountId) };
}

export type ImportOutcome = Awaited<ReturnType<typeof importOutcome>>;

/** How many deliveries of the import's job the queue started and finished (its retries show here). */
export async function jobAttempts(bed: FaultBed, importId: string): Promise<{ started: number; made: number }> {
  const queue = new Queue(IMPORT_QUEUE, { connection: { url: bed.redisUrl } });
  try {
    const job = await queue.getJob(importId);
    return { started: job?.attemptsStarted ?? -1, made: job?.attemptsMade ?? -1 };
  } finally {
    await queue.close();
  }
}

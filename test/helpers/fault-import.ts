/**
 * One import the fault tests interrupt: a deterministic 60,000-row file with repeats, malformed
 * rows and contacts that exist already, staged into a fresh account of a fault bed, the means to
 * see where it is and whether it moves, and what an uninterrupted run of it leaves behind.
 */
import { afterAll, beforeAll, expect } from 'bun:test';
import { randomBytes } from 'node:crypto';
import type { Sql } from '../../src/db';
import { createImportQueue } from '../../src/imports/bullmq-queue';
import { LocalStore } from '../../src/storage/local';
import { UploadTokens } from '../../src/storage/upload-token';
import { contactsChecksum, faultBed, waitForImportEnd, type FaultBed, type ProcessBed } from './fault-bed';
import { stageImport } from './file-store';
import { createAccount, createAttribute } from './fixtures';
import { stagingOf } from './staging';

export const ROWS = 60_000;
/** Many merge batches for 60,000 rows, so a fault lands in the middle of a phase. */
export const FAULT_BED_ENV = { IMPORT_BATCH_SIZE: '1000' };

/** The file: the last 10,000 rows repeat earlier addresses, every 997th row is malformed. */
export function faultCsv(): string {
  const lines = ['Email,n'];
  for (let i = 0; i < ROWS; i++) {
    if (i % 997 === 0) lines.push(`broken-${i},1`);
    else lines.push(`user${i % 50_000}@example.com,${i}`);
  }
  return `${lines.join('\n')}\n`;
}

/** A fresh account with the `n` attribute and some of the file's addresses already stored. */
export async function faultAccount(sql: Sql): Promise<string> {
  const id = await createAccount(sql);
  await createAttribute(sql, id, 'n', 'number');
  await sql`
    insert into contacts (account_id, email_md5, email, attributes, brand_ids, enabled, first_source)
    select ${id}, md5('user' || k || '@example.com')::uuid, 'user' || k || '@example.com',
           jsonb_build_object('n', -k), '{}', k % 2 = 0, 'api'
    from generate_series(0, 20000, 7) k`;
  return id;
}

/** A fresh account with the file staged as an `uploaded` import (not enqueued). */
export async function stageFaultImport(bed: ProcessBed, csv: string): Promise<{ accountId: string; importId: string }> {
  const accountId = await faultAccount(bed.sql);
  const store = new LocalStore(bed.storeDir, 'http://localhost:0', new UploadTokens(randomBytes(32)));
  const importId = await stageImport(bed.sql, store, accountId, csv, {
    columns: ['Email', 'n'],
    strategy: 'overwrite',
    restoreDisabled: true,
  });
  return { accountId, importId };
}

export async function enqueue(bed: ProcessBed, accountId: string, importId: string): Promise<void> {
  const queue = createImportQueue(bed.redisUrl);
  try {
    await queue.enqueueImport(accountId, importId);
  } finally {
    await queue.close();
  }
}

export interface Progress {
  status: string;
  phase: string | null;
  checkpoint: number;
  rowCount: number | null;
  attempts: number;
  /** rows COPYed into staging so far (the read phase) */
  staged: number;
  /** the database's clock when this was read */
  at: Date;
  updatedAt: Date;
}

export async function progress(sql: Sql, importId: string): Promise<Progress> {
  const [row] = await sql<Omit<Progress, 'staged'>[]>`
    select status, phase, checkpoint::int as checkpoint, row_count::int as "rowCount", attempts,
           clock_timestamp() as at, updated_at as "updatedAt"
    from contact_imports where id = ${importId}`;
  let staged = 0;
  try {
    // Its own table, or on a cluster its pooled set's (worker/import/staging-pool.ts).
    const { rows } = await stagingOf(sql, importId);
    const [r] = await sql.unsafe<{ n: number }[]>(`select count(*)::int as n from ${rows}`);
    staged = r!.n;
  } catch {
    // not created yet, or dropped
  }
  return { ...row!, staged };
}

export async function until<T>(what: string, check: () => Promise<T | undefined | false>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await check().catch(() => undefined);
    if (got) return got;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await Bun.sleep(20);
  }
}

/** Waits until the import is in `phase` with work done in it, so a fault lands mid-phase. */
export function midPhase(sql: Sql, importId: string, phase: 'read' | 'merge'): Promise<Progress> {
  return until(`${phase} under way`, async () => {
    const p = await progress(sql, importId);
    if (p.phase !== phase) return undefined;
    return (phase === 'read' ? p.staged > 0 : p.checkpoint > 0) ? p : undefined;
  });
}

/**
 * Milliseconds from `since` (the database's clock at the fault) until the import moves again: a
 * run committed something after it (the read phase starts with an update; merge batches move the
 * checkpoint), or it ended.
 */
export async function movingAgain(sql: Sql, importId: string, since: Date, ms = 60_000): Promise<number> {
  const p = await until(
    'the import to move again',
    async () => {
      const now = await progress(sql, importId);
      return now.updatedAt > since || now.status === 'success' || now.status === 'failed' ? now : undefined;
    },
    ms,
  );
  return Math.max(0, p.updatedAt.getTime() - since.getTime());
}

/** The hardening issue's bound for a killed worker: from the kill to the import moving again. */
export const RESUME_WITHIN_MS = 30_000;

/**
 * A worker killed mid-import (`kill`, then `replace` starting another, if the test does): the time
 * until the import moves again and its end state, printed as one JSON line (`fault`, `phase`) for
 * the notes, then checked: moving again within RESUME_WITHIN_MS, and ending as `reference`, the
 * uninterrupted run of the same file.
 */
export async function expectResumedAfterKill(
  bed: ProcessBed,
  run: { accountId: string; importId: string; reference: Outcome },
  report: { fault: string; phase: string },
  kill: () => Promise<void>,
  replace: () => Promise<unknown> = async () => {},
): Promise<void> {
  await kill();
  const killedAt = await dbNow(bed.sql);
  await replace();
  const recoveryMs = await movingAgain(bed.sql, run.importId, killedAt, RESUME_WITHIN_MS + 15_000);
  const got = await outcome(bed.sql, run.accountId, run.importId);
  const countsEqual = JSON.stringify(got) === JSON.stringify(run.reference);
  console.log(JSON.stringify({ ...report, recoveryMs, countsEqual }));
  expect(recoveryMs).toBeLessThan(RESUME_WITHIN_MS);
  expect(got).toEqual(run.reference);
}

export async function dbNow(sql: Sql): Promise<Date> {
  const [r] = await sql<{ now: Date }[]>`select clock_timestamp() as now`;
  return r!.now;
}

/** What the tests compare with an uninterrupted run: the import's counts and every contact. */
export async function outcome(sql: Sql, accountId: string, importId: string, ms = 60_000) {
  const end = await waitForImportEnd(sql, accountId, importId, ms);
  const {
    status,
    rowCount,
    addedCount,
    updatedCount,
    skippedCount,
    malformedCount,
    duplicateInFileCount,
    failureReason,
  } = end;
  return {
    status,
    rowCount,
    addedCount,
    updatedCount,
    skippedCount,
    malformedCount,
    duplicateInFileCount,
    failureReason,
    contacts: await contactsChecksum(sql, accountId),
  };
}

/** The worker process (a fault bed child) holding the import's PostgreSQL session lock, by its APP_NAME. */
export async function runningOn(sql: Sql, importId: string): Promise<string | undefined> {
  const [row] = await sql<{ app: string }[]>`
    select a.application_name as app
    from pg_locks l join pg_stat_activity a on a.pid = l.pid
    where l.locktype = 'advisory' and l.granted and l.objsubid = 1
      and ((l.classid::int8 << 32) | l.objid::int8)
          = hashtextextended(${`contact-import:${importId.toLowerCase()}`}, 0)`;
  return row?.app;
}

export type Outcome = Awaited<ReturnType<typeof outcome>>;

/**
 * The uninterrupted run every faulted one must equal: the file imported by a worker started for it (and killed
 * after).
 */
export async function referenceRun(bed: ProcessBed, csv: string): Promise<Outcome> {
  const { accountId, importId } = await stageFaultImport(bed, csv);
  const worker = await bed.start('worker', { APP_NAME: 'reference' });
  try {
    await enqueue(bed, accountId, importId);
    return await outcome(bed.sql, accountId, importId).catch(async (e: unknown) => {
      // What the worker did last says where the run stands: its phases' lines are in its log.
      throw new Error(`${(e as Error).message}\nthe worker's log ends:\n${await bed.tail(worker, 30)}`, { cause: e });
    });
  } finally {
    await bed.kill(worker);
  }
}

/**
 * What a worker or Redis fault test file sets up: a fault bed with FAULT_BED_ENV, the file, and
 * the outcome of an uninterrupted run of it, made before its tests and removed after. Read the
 * fields inside tests and hooks.
 */
export function referenceBed<B extends ProcessBed = FaultBed>(
  makeBed: () => Promise<B> = () => faultBed(FAULT_BED_ENV) as unknown as Promise<B>,
): { bed: B; csv: string; reference: Outcome } {
  const it = {} as { bed: B; csv: string; reference: Outcome };
  beforeAll(async () => {
    it.bed = await makeBed();
    it.csv = faultCsv();
    it.reference = await referenceRun(it.bed, it.csv);
    expect(it.reference).toMatchObject({ status: 'success', failureReason: null });
  }, 180_000);
  afterAll(async () => {
    await it.bed?.stop();
  });
  return it;
}

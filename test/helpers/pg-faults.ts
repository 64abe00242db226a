/**
 * PostgreSQL faults during an import, on a fault bed: a file with repeats, malformed rows and
 * contacts that exist already; holds that keep an import inside one phase (so a fault lands there,
 * whatever the machine's speed); and what an import ended with, to compare with an uninterrupted run.
 */
import { Queue } from 'bullmq';
import type { Sql } from '../../src/db';
import { IMPORT_QUEUE } from '../../src/imports/jobs';
import type { FaultBed } from './fault-bed';
import { progress, until } from './fault-import';

/** 60,000 rows (test/helpers/fault-import.ts) in batches of 2,000: 30 COPY statements and 30 merge batches. */
export const PG_FAULT_ENV = { IMPORT_BATCH_SIZE: '2000' };

const hex = (importId: string) => importId.replaceAll('-', '').toLowerCase();
const rowsTable = (importId: string) => `import_rows_${hex(importId)}`;

export type Phase = 'read' | 'dedupe' | 'merge';

/**
 * Keeps the import inside `phase` until released (or until the holding session dies with the
 * fault): read waits on a SHARE lock of its staging table (its next COPY), dedupe on an uncommitted
 * table of the name its first merge-table part takes, merge on the account's advisory lock that
 * every batch takes shared. Resolves once the import is held there with work done in the phase.
 */
export async function holdIn(
  bed: FaultBed,
  importId: string,
  accountId: string,
  phase: Phase,
): Promise<{ release(): Promise<void> }> {
  const conn = await bed.sql.reserve();
  const release = async () => {
    await conn`rollback`.catch(() => {});
    await conn`select pg_advisory_unlock_all()`.catch(() => {});
    conn.release();
  };
  try {
    if (phase === 'merge') {
      await until('merge under way', async () => {
        const s = await progress(bed.sql, importId);
        return s.phase === 'merge' && s.checkpoint > 0;
      });
      await conn`select pg_advisory_lock(hashtextextended(${accountId}::uuid::text, 0))`;
      const s = await progress(bed.sql, importId);
      if (!(s.status === 'importing' && s.checkpoint < (s.rowCount ?? 0)))
        throw new Error(`the merge ended before it was held: ${JSON.stringify(s)}`);
    } else {
      // Both start once the read has staged rows: its drop of old staging tables is behind it.
      await until('read under way', async () => {
        const s = await progress(bed.sql, importId);
        return s.phase === 'read' && s.staged > 0;
      });
      await conn`begin`;
      if (phase === 'read') await conn.unsafe(`lock table ${rowsTable(importId)} in share mode`);
      else await conn.unsafe(`create table import_merge_${hex(importId)}_0 (held int)`);
      await until(`${phase} held`, async () => (await progress(bed.sql, importId)).phase === phase);
    }
    // The worker is now waiting on our lock, inside the phase.
    await until(`the worker waiting on the ${phase} hold`, async () => {
      const [w] = await bed.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where application_name = ${WORKER_APP} and wait_event_type = 'Lock'`;
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

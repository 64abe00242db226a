import { join } from 'node:path';
import { stagingTables } from './staging';
import type { Pipeline } from './state';

const SQL_DIR = join(import.meta.dir, '../../sql/merge');
/** Merge speed assumed for Retry-After before the first batch has been timed. */
const ASSUMED_ROWS_PER_SECOND = 20_000;
/** In-process retries of a batch that lost a deadlock or serialization race before giving up to the queue. */
const RACE_RETRIES = 3;

/** What merge-batch.sql returns: the batch's own counts and the import's new percentage. */
interface BatchResult {
  percentComplete: number;
  added: number;
  updated: number;
  events: number;
}

const sqlTexts = new Map<string, Promise<string>>();

/** A statement of sql/merge for one import's merge table (each file is read once per process). */
async function mergeStatement(file: string, table: string): Promise<string> {
  let text = sqlTexts.get(file);
  if (!text) sqlTexts.set(file, (text = Bun.file(join(SQL_DIR, file)).text()));
  return (await text).replaceAll(':"merge_table"', table);
}

/** 40P01 deadlock, 40001 serialization failure: the batch's transaction rolled back, try again. */
function lostRace(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/**
 * Phase 3, merge: seq ranges of `batchSize` rows, each ONE transaction that takes the account's
 * advisory lock exclusive, re-reads the checkpoint under a row lock, and runs merge-batch.sql
 * (contacts, events, checkpoint, counters, percent, estimated end in one statement). A batch whose
 * range is at or below the committed checkpoint is never run again.
 *
 * Returns false when the import stopped being a running merge under us (failed or finished by
 * another hand); the caller then leaves it alone.
 */
export async function mergePhase(p: Pipeline): Promise<boolean> {
  const { sql, job } = p;
  const rowCount = job.rowCount ?? 0;
  const table = stagingTables(job.id).merge;
  const statement = await mergeStatement('merge-batch.sql', table);
  const insertStatement = await mergeStatement('insert-batch.sql', table);
  const clashStatement = await mergeStatement('batch-clash.sql', table);
  let done = job.checkpoint;

  if (done < rowCount) {
    // Own commit, before the first batch: from now on single contact writes get 409 with an estimate.
    const seconds = Math.ceil((rowCount - done) / ASSUMED_ROWS_PER_SECOND);
    await sql`
      insert into bulk_operations (account_id, id, kind, estimated_end)
      values (${job.accountId}::uuid, ${job.id}::uuid, 'contact-import', now() + make_interval(secs => ${seconds}))
      on conflict (account_id, id) do update set estimated_end = excluded.estimated_end`;
  }

  const startedAt = Date.now();
  const startedFrom = done;
  while (done < rowCount) {
    const hi = Math.min(done + p.batchSize, rowCount);
    const elapsed = Date.now() - startedAt;
    const perMs = done > startedFrom && elapsed > 0 ? (done - startedFrom) / elapsed : ASSUMED_ROWS_PER_SECOND / 1000;
    const estimatedEnd = new Date(Date.now() + (rowCount - done) / perMs);

    let outcome: { stop: true } | { checkpoint: number; result?: BatchResult } | undefined;
    for (let attempt = 0; outcome === undefined; attempt++) {
      try {
        outcome = await sql.begin(async (tx) => {
          await tx`select pg_advisory_xact_lock(hashtextextended(${job.accountId}::uuid::text, 0))`;
          await tx`set local jit = off`; // compiling this statement costs more than it saves
          // The batch's writes and its checkpoint are one transaction, so a commit the server loses
          // in a crash loses both together, and the next run redoes the batch from the older
          // checkpoint: no wait for the WAL flush is needed for exactly-once. (The finish phase
          // commits synchronously, and its flush covers every batch before it.)
          await tx`set local synchronous_commit = off`;
          // Look each staged row up through the contacts primary key. A hash join would read every
          // contact of the account once per batch: fine for 10,000 contacts, ruinous for 25 million.
          // The probes come in email_md5 order (seq follows it), so they walk the index leaf by leaf.
          await tx`set local enable_hashjoin = off`;
          await tx`set local enable_mergejoin = off`;
          const [state] = await tx<{ status: string; phase: string | null; checkpoint: number }[]>`
            select status, phase, checkpoint from contact_imports
            where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid
            for update`;
          if (!state || state.status !== 'importing' || state.phase !== 'merge') return { stop: true as const };
          if (state.checkpoint !== done) return { checkpoint: state.checkpoint };
          // A batch whose key range holds no contact and no seed of the account is all adds: the
          // plain INSERT of insert-batch.sql does exactly what merge-batch.sql would, for less.
          const [probe] = await tx.unsafe<{ clash: boolean }[]>(clashStatement, [job.accountId, done, hi], { prepare: false });
          const [r] = probe!.clash
            ? await tx.unsafe<BatchResult[]>(
                statement,
                [job.accountId, job.id, done, hi, job.strategy, job.overwriteBrands, job.restoreDisabled, job.publishEvents, job.method, rowCount, estimatedEnd],
                { prepare: false },
              )
            : await tx.unsafe<BatchResult[]>(insertStatement, [job.accountId, job.id, done, hi, job.publishEvents, job.method, rowCount, estimatedEnd], { prepare: false });
          return { checkpoint: hi, result: r! };
        });
      } catch (e) {
        if (!lostRace(e) || attempt >= RACE_RETRIES) throw e;
        p.log('import merge batch retried', { importId: job.id, seq: done, code: (e as { code?: string }).code });
        await Bun.sleep(100 * 2 ** attempt);
      }
    }
    if ('stop' in outcome) return false;
    done = outcome.checkpoint;
    if (outcome.result) p.log('import merge batch', { importId: job.id, checkpoint: done, ...outcome.result });
  }
  job.checkpoint = done;
  p.log('import merged', { importId: job.id, rowCount, ms: Date.now() - startedAt });
  return true;
}

import { join } from 'node:path';
import type { Sql } from '../../src/db';
import { batchHoldsAccount, drainContactWrites, holdContactWrites } from '../../src/contacts/write-guard';
import { advanceMerge } from '../../src/imports/lifecycle';
import { MERGE_ROWS_PER_SECOND } from '../../src/imports/retry-after';
import { accountMergeLock, mergeBatchLock } from '../../src/locks';
import { partSizes, StagingLostError } from './dedupe';
import { stagingTables } from './staging';
import type { Pipeline } from './state';

const SQL_DIR = join(import.meta.dir, '../../sql/merge');
/** In-process retries of a batch that lost a deadlock or serialization race before giving up to the queue. */
const RACE_RETRIES = 3;

/** What one batch's statement returns: rows read from the merge table and what became of them. */
interface BatchCounts {
  rows: number;
  added: number;
  updated: number;
  skipped: number;
  events: number;
}

/** How one batch ended: merged (committed), or rolled back because the import stopped or the checkpoint is not where it expected. */
type Outcome = { hi: number; percentComplete: number; counts: BatchCounts } | { halt: 'stop' | 'moved' };

/** Thrown inside a batch's transaction to roll it back and report the outcome. */
class BatchHalted extends Error {
  constructor(readonly halt: 'stop' | 'moved') {
    super(`merge batch halted: ${halt}`);
  }
}

/** One part of the merge table: its statements, and where its rows sit in the import's seq. */
interface Part {
  /** rows of the parts before it: its seq n is the import's seq offset + n */
  offset: number;
  size: number;
  statements: { merge: string; insert: string; clash: string };
}

interface Merge {
  p: Pipeline;
  rowCount: number;
  parts: Part[];
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
 * Phase 3, merge: seq ranges of `batchSize` rows, each ONE transaction, `concurrency` of them in
 * flight at once (PostgreSQL runs each on its own backend, so two use both cores of a small box).
 * When batch k commits, batch k+2 starts while k+1 still runs. A batch whose range is at or below
 * the committed checkpoint is never run again. The import's seq runs through the merge table's
 * parts in order (dedupe.ts); every batch but the last is exactly `batchSize` rows of that order,
 * so `percentComplete` moves in the spec's steps, and a batch that meets a part's end goes on into
 * the next part (segmentsOf).
 *
 * Commits stay in seq order, so `checkpoint` stays contiguous: a batch does its heavy statement,
 * then waits (on an advisory lock the earlier batch holds for its whole transaction, a wait the
 * deadlock detector can see) until the earlier batch's transaction has ended, and only then moves
 * the checkpoint, from exactly its own first seq (advance.sql). If the earlier batch rolled back,
 * that update finds nothing and this batch rolls back too, to be run again.
 *
 * Locking: `conn` (the run's reserved connection) holds a session lock per account for the whole
 * phase, so two imports of one account never merge at once (their batches could meet on a
 * contact). Single contact writes are drained once (the account's lock exclusive, after the
 * bulk_operations row committed); batches then hold it shared, which still keeps `attribute create`
 * out, and every later single write sees the row and gets 409.
 *
 * Returns false when the import stopped being a running merge under us (failed or finished by
 * another hand); the caller then leaves it alone.
 */
export async function mergePhase(p: Pipeline, conn: Sql, concurrency: number): Promise<boolean> {
  const { sql, job } = p;
  const rowCount = job.rowCount ?? 0;
  if (job.checkpoint >= rowCount) return true;
  const sizes = await partSizes(p);
  if (!sizes || sizes.reduce((a, b) => a + b, 0) !== rowCount) throw new StagingLostError(`the merge table of import ${job.id} does not hold its ${rowCount} rows`);
  const parts: Part[] = [];
  let offset = 0;
  for (const [k, part] of stagingTables(job.id).parts.entries()) {
    const size = sizes[k]!;
    parts.push({
      offset,
      size,
      statements: {
        merge: await mergeStatement('merge-batch.sql', part.table),
        insert: await mergeStatement('insert-batch.sql', part.table),
        clash: await mergeStatement('batch-clash.sql', part.table),
      },
    });
    offset += size;
  }
  const m: Merge = { p, rowCount, parts };

  const mergeLock = accountMergeLock(conn, job.accountId);
  const [free] = await conn<{ locked: boolean }[]>`select pg_try_advisory_lock(${mergeLock}) as locked`;
  if (!free?.locked) {
    p.log('import merge waits for another import of the account', { importId: job.id });
    await conn`select pg_advisory_lock(${mergeLock})`;
  }
  try {
    // Own commit, before the first batch: from now on single contact writes get 409 with an estimate.
    const seconds = Math.ceil((rowCount - job.checkpoint) / MERGE_ROWS_PER_SECOND);
    await holdContactWrites(sql, job.accountId, job.id, 'contact-import', seconds);
    await drainContactWrites(sql, job.accountId);
    return await mergeBatches(m, Math.max(1, concurrency));
  } finally {
    // A broken connection took the lock with it; the caller releases the connection either way.
    await conn`select pg_advisory_unlock(${mergeLock})`.catch(() => {});
  }
}

/** The pipeline of batches from the committed checkpoint to the end. */
async function mergeBatches(m: Merge, concurrency: number): Promise<boolean> {
  const { p, rowCount } = m;
  const { job } = p;
  const startedAt = Date.now();
  const startedFrom = job.checkpoint;
  let done = job.checkpoint;
  while (done < rowCount) {
    // In seq order; each batch after the first waits for the one before it (its `lo`).
    const inFlight: { lo: number; locked: Promise<void>; outcome: Promise<Outcome> }[] = [];
    let next = done;
    const launch = async () => {
      const previous = inFlight.at(-1);
      // The earlier batch must hold its key before this one can wait on it.
      if (previous) await previous.locked;
      const lo = next;
      // Exactly batchSize rows of the import's order (the spec's batches), across parts if need be.
      const hi = Math.min(lo + p.batchSize, rowCount);
      next = hi;
      const elapsed = Date.now() - startedAt;
      const perMs = done > startedFrom && elapsed > 0 ? (done - startedFrom) / elapsed : MERGE_ROWS_PER_SECOND / 1000;
      const estimatedEnd = new Date(Date.now() + (rowCount - done) / perMs);
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const outcome = runBatch(m, lo, hi, previous?.lo, estimatedEnd, locked).finally(locked);
      outcome.catch(() => {}); // awaited in order below
      inFlight.push({ lo, locked: isLocked, outcome });
    };
    while (inFlight.length < concurrency && next < rowCount) await launch();

    let halt: 'stop' | 'moved' | undefined;
    while (inFlight.length > 0 && !halt) {
      const head = inFlight.shift()!;
      let outcome: Outcome;
      try {
        outcome = await head.outcome;
      } catch (e) {
        await Promise.allSettled(inFlight.map((b) => b.outcome)); // never leave a transaction behind
        throw e;
      }
      if ('halt' in outcome) {
        halt = outcome.halt;
        break;
      }
      done = outcome.hi;
      p.log('import merge batch', { importId: job.id, checkpoint: done, percentComplete: outcome.percentComplete, ...outcome.counts });
      if (next < rowCount) await launch();
    }
    if (!halt) continue;
    // Later batches in flight cannot commit past a halted one; let them roll back.
    await Promise.allSettled(inFlight.map((b) => b.outcome));
    if (halt === 'stop') return false;
    const [state] = await p.sql<{ status: string; phase: string | null; checkpoint: number }[]>`
      select status, phase, checkpoint from contact_imports where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid`;
    if (!state || state.status !== 'importing' || state.phase !== 'merge') return false;
    done = state.checkpoint;
  }
  job.checkpoint = done;
  p.log('import merged', { importId: job.id, rowCount, ms: Date.now() - startedAt });
  return true;
}

/** One batch, (lo, hi], retried in place when it loses a deadlock or serialization race. */
async function runBatch(m: Merge, lo: number, hi: number, previousLo: number | undefined, estimatedEnd: Date, locked: () => void): Promise<Outcome> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await batchTransaction(m, lo, hi, previousLo, estimatedEnd, locked);
    } catch (e) {
      if (e instanceof BatchHalted) return { halt: e.halt };
      if (!lostRace(e) || attempt >= RACE_RETRIES) throw e;
      m.p.log('import merge batch retried', { importId: m.p.job.id, seq: lo, code: (e as { code?: string }).code });
      await Bun.sleep(100 * 2 ** attempt);
    }
  }
}

/** The pieces of the import's seq range (lo, hi] in each part it touches, as that part's own seqs. */
function segmentsOf(parts: readonly Part[], lo: number, hi: number): { part: Part; from: number; to: number }[] {
  return parts
    .filter((x) => x.size > 0 && x.offset < hi && x.offset + x.size > lo)
    .map((part) => ({ part, from: Math.max(lo, part.offset) - part.offset, to: Math.min(hi, part.offset + part.size) - part.offset }));
}

async function batchTransaction(m: Merge, lo: number, hi: number, previousLo: number | undefined, estimatedEnd: Date, locked: () => void): Promise<Outcome> {
  const { p, rowCount } = m;
  const { job } = p;
  return (await p.sql.begin(async (tx) => {
    // This batch's own key (held to its end), and the account's lock SHARED: single writes were
    // drained and are refused now, and `attribute create` (exclusive) still cannot interleave.
    // jit off: compiling this statement costs more than it saves. synchronous_commit off: the
    // batch's writes and its checkpoint are one transaction, so a commit the server loses in a
    // crash loses both together and the next run redoes the batch (the finish phase commits
    // synchronously, and its flush covers every batch before it). Hash and merge joins off: each
    // staged row is looked up through the contacts primary key; a hash join would read every
    // contact of the account once per batch. The probes come in email_md5 order (seq follows it),
    // so they walk the index leaf by leaf.
    await tx`
      select pg_advisory_xact_lock(${mergeBatchLock(tx, job.id, lo)}),
             ${batchHoldsAccount(tx, job.accountId)},
             set_config('jit', 'off', true), set_config('synchronous_commit', 'off', true),
             set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)`;
    locked();
    // A plain read: a row lock here would serialise the batches. The earlier batch in flight may
    // not have committed yet (checkpoint below lo); advance.sql settles that at the end.
    const [state] = await tx<{ status: string; phase: string | null; checkpoint: number }[]>`
      select status, phase, checkpoint from contact_imports
      where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid`;
    if (!state || state.status !== 'importing' || state.phase !== 'merge') throw new BatchHalted('stop');
    if (state.checkpoint > lo || (state.checkpoint < lo && previousLo === undefined)) throw new BatchHalted('moved');

    // A batch that crosses a part boundary runs its statements once per part, in the one
    // transaction: it still commits (and moves the checkpoint) as one batch. Its brand events are
    // then one outbox row per brand and part, the same (contact, brand) pairs.
    const counts: BatchCounts = { rows: 0, added: 0, updated: 0, skipped: 0, events: 0 };
    for (const { part, from, to } of segmentsOf(m.parts, lo, hi)) {
      const { statements } = part;
      // A range that holds no contact and no seed of the account is all adds: the plain INSERT
      // of insert-batch.sql does exactly what merge-batch.sql would, for less.
      const [probe] = await tx.unsafe<{ clash: boolean }[]>(statements.clash, [job.accountId, from, to], { prepare: false });
      const [got] = probe!.clash
        ? await tx.unsafe<BatchCounts[]>(
            statements.merge,
            [job.accountId, job.id, from, to, job.strategy, job.overwriteBrands, job.restoreDisabled, job.publishEvents, job.method],
            { prepare: false },
          )
        : await tx.unsafe<BatchCounts[]>(statements.insert, [job.accountId, job.id, from, to, job.publishEvents, job.method], { prepare: false });
      for (const k of ['rows', 'added', 'updated', 'skipped', 'events'] as const) counts[k] += Number(got![k]);
    }
    // The merge table may sit on unlogged tables that a PostgreSQL crash empties: never count a
    // batch that read fewer rows than its range holds.
    if (counts.rows < hi - lo) throw new StagingLostError(`staged rows ${lo + 1}…${hi} of import ${job.id} were lost (read ${counts.rows})`);

    // Commits in seq order: wait until the earlier batch's transaction has ended, committed or not.
    if (previousLo !== undefined) await tx`select pg_advisory_xact_lock_shared(${mergeBatchLock(tx, job.id, previousLo)})`;
    const percentComplete = await advanceMerge(tx, job.accountId, job.id, {
      from: lo,
      to: hi,
      added: counts.added,
      updated: counts.updated,
      skipped: counts.skipped,
      rowCount,
      estimatedEnd,
    });
    if (percentComplete === undefined) {
      const [now] = await tx<{ running: boolean }[]>`
        select status = 'importing' and phase = 'merge' as running from contact_imports
        where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid`;
      throw new BatchHalted(now?.running ? 'moved' : 'stop');
    }
    return { hi, percentComplete, counts };
  })) as Outcome;
}

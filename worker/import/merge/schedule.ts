import { MERGE_ROWS_PER_SECOND } from '../../../src/imports/retry-after';
import { countMerged, importMergeRest } from '../../../src/metrics/import-pipeline';
import { runBatch, type Merge, type Outcome } from './batch';
import { PlanVacuum } from './plan-vacuum';

/**
 * The pipeline of batches from the committed `checkpoint` to the end: seq ranges of `batchSize`
 * rows, each ONE transaction, `concurrency` of them in flight at once (PostgreSQL runs each on its
 * own backend, so two use both cores of a small box). When batch k commits, batch k+2 starts
 * while k+1 still runs. A batch whose range is at or below the committed checkpoint is never run
 * again.
 *
 * Commits stay in seq order, so `checkpoint` stays contiguous: a batch does its heavy statement,
 * then waits (on an advisory lock the earlier batch holds for its whole transaction, a wait the
 * deadlock detector can see) until the earlier batch's transaction has ended, and only then moves
 * the checkpoint, from exactly its own first seq (advance.sql). If the earlier batch rolled back,
 * that update finds nothing and this batch rolls back too, to be run again.
 *
 * Returns `stopped` when the import stopped being a running merge under us (failed or finished by
 * another hand), and `yielded` when the run was asked to give way (Pipeline.giveWay): no batch is
 * launched after the ask, the ones in flight commit, and the next run resumes at their checkpoint.
 */
export async function mergeBatches(
  m: Merge,
  checkpoint: number,
  concurrency: number,
): Promise<'merged' | 'stopped' | 'yielded'> {
  // Each committed batch's plan tables vacuumed beside the next batches, all done before this returns.
  const vacuum = new PlanVacuum(m.p);
  try {
    return await runBatches(m, checkpoint, concurrency, vacuum);
  } finally {
    const waited = performance.now();
    await vacuum.settled();
    const ms = Math.round(performance.now() - waited);
    // The phase waits for the last VACUUM: when that is long, the log says so.
    if (ms >= 1_000) m.p.log("import merge waited for its plan tables' vacuum", { importId: m.p.job.id, ms });
  }
}

async function runBatches(
  m: Merge,
  checkpoint: number,
  concurrency: number,
  vacuum: PlanVacuum,
): Promise<'merged' | 'stopped' | 'yielded'> {
  const { p, rowCount } = m;
  const { job } = p;
  const startedAt = Date.now();
  const startedFrom = checkpoint;
  let done = checkpoint;
  let yielding = false;
  while (done < rowCount && !yielding) {
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
      const outcome = runBatch(m, { lo, hi, previousLo: previous?.lo, estimatedEnd, locked }).finally(locked);
      outcome.catch(() => {}); // awaited in order below
      inFlight.push({ lo, locked: isLocked, outcome });
    };
    while (inFlight.length < concurrency && next < rowCount) await launch();

    let halt: 'stop' | 'moved' | undefined;
    while (inFlight.length > 0 && !halt) {
      // At least one batch per run, so a run that gives way at once still moves the import on.
      if (!yielding && done > startedFrom && p.giveWay?.()) yielding = true;
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
      const { percentComplete, counts, pacing, plans } = outcome;
      vacuum.after(plans);
      countMerged(counts);
      importMergeRest.inc(pacing.restedMs / 1000);
      // Paced (the API was busy): how many pieces, and how long the batch rested between them.
      const paced = pacing.pieces > 0 ? { pacedPieces: pacing.pieces, restedMs: pacing.restedMs } : {};
      p.log('import merge batch', { importId: job.id, checkpoint: done, percentComplete, ...counts, ...paced });
      if (next < rowCount && !yielding) await launch();
    }
    if (!halt) continue;
    // Later batches in flight cannot commit past a halted one; let them roll back.
    await Promise.allSettled(inFlight.map((b) => b.outcome));
    if (halt === 'stop') return 'stopped';
    const [state] = await p.sql<{ status: string; phase: string | null; checkpoint: number }[]>`
      select status, phase, checkpoint from contact_imports
      where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid`;
    if (!state || state.status !== 'importing' || state.phase !== 'merge') return 'stopped';
    done = state.checkpoint;
  }
  if (done < rowCount) {
    p.log('import merge gives way', { importId: job.id, checkpoint: done, ms: Date.now() - startedAt });
    return 'yielded';
  }
  p.log('import merged', { importId: job.id, rowCount, ms: Date.now() - startedAt });
  return 'merged';
}

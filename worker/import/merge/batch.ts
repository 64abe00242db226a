import { batchHoldsAccount } from '../../../src/contacts/write-guard';
import { advanceMerge } from '../../../src/imports/lifecycle';
import { type Tx, mergeBatchLock } from '../../../src/db';
import { appendContactTallies, TallyDeltas } from '../../../src/search/stats';
import { Pacer, type PaceTurn } from '../pace';
import { StagingLostError } from '../errors';
import { type Pipeline } from '../state';
import { decideParams, fusedParams, type PartStatements } from './sql-files';

/** In-process retries of a batch that lost a deadlock or serialization race before giving up to the queue. */
const RACE_RETRIES = 3;

/**
 * Rows of one statement while the API is busy (Pipeline.apiBusy): the batch, still one
 * transaction, goes in pieces this big, each followed by a rest of `pace` times its own time
 * (pace.ts). Measured with bench step `mixed` (another account's GET/POST/PATCH p99 while import
 * A merges, over idle), at 1M rows: whole batches ×4.5-6.9; always in pieces of 10,000 with rests
 * of 2×: ×2.1-2.3; of 5,000 with rests of 4×: ×1.7-1.9; so, only while the API says it is busy:
 * ×1.3-1.4, the merge then ~5× slower (bench/findings/2026-11-25-mixed-step-met-at-1m.md). At 5M
 * rows, with the duplicate scan paced too, pieces of 1,000 instead of 5,000 (the same rest):
 * ×2.7-2.9 instead of ×3.5-4.1.
 * The API's commits wait on WAL flushes that carry the merge's WAL before theirs: smaller pieces
 * make each such flush smaller (bench/findings/2026-11-26-api-while-import-merges-paced.md).
 */
export const PACED_ROWS = 1_000;

/**
 * Rows of one statement while the API is not busy: a batch of more goes in pieces this big, so that
 * a load that starts meanwhile waits at most one such piece (~0.1-0.2 s) before the batch paces.
 */
export const UNPACED_ROWS = 20_000;

/** One part of the merge table: its statements, and where its rows sit in the import's seq. */
export interface Part {
  /** rows of the parts before it: its seq n is the import's seq offset + n */
  offset: number;
  size: number;
  statements: PartStatements;
  /** its plan table (merge-batch.sql), which the batches that plan rows of it write and empty */
  plan: string;
}

/** One import's merge: the rows it merges and the parts they sit in. */
export interface Merge {
  p: Pipeline;
  rowCount: number;
  parts: Part[];
  /** record the skipped rows for the rejected-rows report (the import's read recorded its own) */
  recordSkips: boolean;
  /** the batches' paced pieces, one at a time (pace.ts) */
  turn: PaceTurn;
}

/** One batch, (lo, hi] of the import's seq, and where it stands among the batches in flight. */
export interface Batch {
  lo: number;
  hi: number;
  /** the first seq of the batch in flight before it, whose transaction must end before this one commits */
  previousLo: number | undefined;
  /** when the whole merge should end at the pace so far (for Retry-After) */
  estimatedEnd: Date;
  /** called once the batch holds its own lock, so the next batch can wait on it */
  locked: () => void;
}

/** What one batch's statement returns: rows read from the merge table and what became of them. */
interface BatchCounts {
  rows: number;
  added: number;
  updated: number;
  skipped: number;
  events: number;
}

/** How a batch gave the API room: its paced pieces and their rests (none while the API was not busy). */
export interface Pacing {
  pieces: number;
  restedMs: number;
}

/**
 * How one batch ended: merged (committed), or rolled back because the import stopped or the
 * checkpoint is not where it expected.
 */
export type Outcome =
  | { hi: number; percentComplete: number; counts: BatchCounts; pacing: Pacing; plans: string[] }
  | { halt: 'stop' | 'moved' };

/** Thrown inside a batch's transaction to roll it back and report the outcome. */
class BatchHalted extends Error {
  constructor(readonly halt: 'stop' | 'moved') {
    super(`merge batch halted: ${halt}`);
  }
}

/** 40P01 deadlock, 40001 serialization failure: the batch's transaction rolled back, try again. */
function lostRace(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/** One batch, retried in place when it loses a deadlock or serialization race. */
export async function runBatch(m: Merge, b: Batch): Promise<Outcome> {
  for (let attempt = 0; ; attempt++) {
    try {
      const outcome = await batchTransaction(m, b);
      // Committed: wake the event sequencer for the batch's events (src/events/wake.ts).
      if ('counts' in outcome && outcome.counts.events > 0) m.p.eventsCommitted?.();
      return outcome;
    } catch (e) {
      if (e instanceof BatchHalted) return { halt: e.halt };
      if (!lostRace(e) || attempt >= RACE_RETRIES) throw e;
      m.p.log('import merge batch retried', { importId: m.p.job.id, seq: b.lo, code: (e as { code?: string }).code });
      await Bun.sleep(100 * 2 ** attempt);
    }
  }
}

/** The pieces of the import's seq range (lo, hi] in each part it touches, as that part's own seqs. */
function segmentsOf(parts: readonly Part[], lo: number, hi: number): { part: Part; from: number; to: number }[] {
  return parts
    .filter((x) => x.size > 0 && x.offset < hi && x.offset + x.size > lo)
    .map((part) => ({
      part,
      from: Math.max(lo, part.offset) - part.offset,
      to: Math.min(hi, part.offset + part.size) - part.offset,
    }));
}

/**
 * Rows (from, to] of one part in the batch's transaction. A batch that crosses a part boundary
 * runs once per part, and a paced batch once per piece, in the one transaction: it still commits
 * (and moves the checkpoint) as one batch. Its brand events are then one outbox row per brand and
 * statement, the same (contact, brand) pairs.
 */
async function mergeRange(
  tx: Tx,
  m: Merge,
  statements: PartStatements,
  from: number,
  to: number,
  tally: TallyDeltas,
): Promise<BatchCounts & { planned: boolean }> {
  const { job } = m.p;
  const range = [job.accountId, from, to];
  const run = <T extends object>(statement: string, params: unknown[]) =>
    tx.unsafe<T[]>(statement, params as never[], { prepare: false });
  type BrandCount = { brand_id: string; n: number | string };
  // The events' sets are the brands the rows assign, each row once: the tallies take them as such.
  const events = async (statement: string) => {
    if (!job.publishEvents) return 0;
    const sets = await run<BrandCount>(statement, [...range, job.id]);
    for (const r of sets) tally.brand(r.brand_id, Number(r.n));
    return sets.reduce((sum, r) => sum + Number(r.n), 0);
  };
  const brandCounts = async (statement: string, sign: 1 | -1) => {
    for (const r of await run<BrandCount>(statement, range)) tally.brand(r.brand_id, sign * Number(r.n));
  };
  // A range that holds no contact and no seed of the account is all adds: the plain INSERT of
  // insert-batch.sql does exactly what merge-batch.sql would, for less.
  const [probe] = await run<{ contacts: boolean; seeds: boolean }>(statements.clash, range);
  const { seeds } = probe!;
  if (!probe!.contacts && !seeds) {
    const { insert } = statements;
    const added = (await run(insert.insert, [...range, job.id, job.method])).count;
    tally.contacts += added;
    tally.enabled += added;
    const published = await events(insert.events);
    if (!job.publishEvents && added > 0 && (job.brandIds.length > 0 || job.columns.includes('Brand')))
      await brandCounts(insert.gains, 1);
    return { rows: added, added, updated: 0, skipped: 0, events: published, planned: false };
  }
  type Counts = Omit<BatchCounts, 'events'> & {
    assigning: number;
    reenabled: number;
    dropping: number;
    written?: number;
    events?: number;
    /** the fused statement's brands assigned and dropped: brand id → rows */
    gained?: Record<string, number> | null;
    dropped?: Record<string, number> | null;
  };
  const count = (got: Counts) => ({
    rows: Number(got.rows),
    added: Number(got.added),
    updated: Number(got.updated),
    skipped: Number(got.skipped),
  });
  const { fused, split } = statements.merge;
  let counts: ReturnType<typeof count>;
  let written: number;
  let published: number;
  if (fused !== undefined) {
    const [got] = await run<Counts>(fused, fusedParams(range, job, seeds));
    counts = count(got!);
    written = Number(got!.written);
    published = Number(got!.events);
    tally.enabled += Number(got!.reenabled);
    for (const [brand, n] of Object.entries(got!.gained ?? {})) tally.brand(brand, n);
    for (const [brand, n] of Object.entries(got!.dropped ?? {})) tally.brand(brand, -n);
  } else {
    await run(split.plan, [...range, ...decideParams(job, seeds)]);
    const [got] = await run<Counts>(split.counts, range);
    counts = count(got!);
    if (m.recordSkips && counts.skipped > 0) await run(split.skips, range);
    written = counts.added + counts.updated > 0 ? (await run(split.write, [...range, job.id, job.method])).count : 0;
    published = Number(got!.assigning) > 0 ? await events(split.events) : 0;
    tally.enabled += Number(got!.reenabled);
    if (!job.publishEvents && Number(got!.assigning) > 0) await brandCounts(split.gains, 1);
    if (Number(got!.dropping) > 0) await brandCounts(split.drops, -1);
    await run(split.clear, range);
  }
  tally.contacts += counts.added;
  tally.enabled += counts.added;
  if (written !== counts.added + counts.updated) {
    throw new Error(
      `import ${job.id}: a merge batch wrote ${written} contacts, planned ${counts.added} + ${counts.updated}`,
    );
  }
  return { ...counts, events: published, planned: split !== undefined };
}

/**
 * The batch's transaction tallies its own writes of contacts, as one append of its deltas: the
 * contacts it adds (all enabled), the disabled ones it enables, the brands its rows assign (the
 * events' sets when it publishes them, which cost nothing more; else `gains`, about 1.4 µs a row)
 * and those it drops (`drops`), bench/findings/2026-12-06-contact-tallies-cost.md. The UPDATE trigger
 * on contacts, which would count its updates again at 20-30 µs a row, stays quiet while
 * contact_tallies.explicit is on (sql/migrations/0019_contact_tallies.sql). On a Citus cluster the
 * trigger runs on the account's node, where the SET reaches only with citus.propagate_set_commands
 * 'local' (on one PostgreSQL that setting is an unused name).
 */
async function tallyExplicitly(tx: Tx): Promise<void> {
  await tx.unsafe(`set local citus.propagate_set_commands to 'local'; set local contact_tallies.explicit to on`);
}

async function batchTransaction(m: Merge, b: Batch): Promise<Outcome> {
  const { p, rowCount } = m;
  const { job } = p;
  const { lo, hi, previousLo } = b;
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
    await batchHoldsAccount(tx, job.accountId);
    await tallyExplicitly(tx);
    await tx`
      select pg_advisory_xact_lock(${mergeBatchLock(tx, job.id, lo)}),
             set_config('jit', 'off', true), set_config('synchronous_commit', 'off', true),
             set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)`;
    b.locked();
    // A plain read: a row lock here would serialise the batches. The earlier batch in flight may
    // not have committed yet (checkpoint below lo); advance.sql settles that at the end.
    const [state] = await tx<{ status: string; phase: string | null; checkpoint: number }[]>`
      select status, phase, checkpoint from contact_imports
      where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid`;
    if (!state || state.status !== 'importing' || state.phase !== 'merge') throw new BatchHalted('stop');
    if (state.checkpoint > lo || (state.checkpoint < lo && previousLo === undefined)) throw new BatchHalted('moved');

    const counts: BatchCounts = { rows: 0, added: 0, updated: 0, skipped: 0, events: 0 };
    const tally = new TallyDeltas();
    const pacer = new Pacer(p, m.turn);
    const plans = new Set<string>();
    for (const { part, from, to } of segmentsOf(m.parts, lo, hi)) {
      // In pieces of UNPACED_ROWS, or of PACED_ROWS while the API is busy (asked again before each).
      for (let at = from; at < to;) {
        const paced = pacer.busy();
        const end = Math.min(to, at + (paced ? PACED_ROWS : UNPACED_ROWS));
        const got = await pacer.piece(paced, () => mergeRange(tx, m, part.statements, at, end, tally));
        for (const k of ['rows', 'added', 'updated', 'skipped', 'events'] as const) counts[k] += Number(got[k]);
        if (got.planned) plans.add(part.plan);
        at = end;
      }
    }
    const pacing: Pacing = { pieces: pacer.pieces, restedMs: pacer.restedMs };
    // The merge table may sit on unlogged tables that a PostgreSQL crash empties: never count a
    // batch that read fewer rows than its range holds.
    if (counts.rows < hi - lo) {
      throw new StagingLostError(`staged rows ${lo + 1}…${hi} of import ${job.id} were lost (read ${counts.rows})`);
    }

    await appendContactTallies(tx, job.accountId, tally);

    // Commits in seq order: wait until the earlier batch's transaction has ended, committed or not.
    if (previousLo !== undefined) {
      await tx`select pg_advisory_xact_lock_shared(${mergeBatchLock(tx, job.id, previousLo)})`;
    }
    const percentComplete = await advanceMerge(tx, job.accountId, job.id, {
      from: lo,
      to: hi,
      added: counts.added,
      updated: counts.updated,
      skipped: counts.skipped,
      rowCount,
      estimatedEnd: b.estimatedEnd,
    });
    if (percentComplete === undefined) {
      const [now] = await tx<{ running: boolean }[]>`
        select status = 'importing' and phase = 'merge' as running from contact_imports
        where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid`;
      throw new BatchHalted(now?.running ? 'moved' : 'stop');
    }
    return { hi, percentComplete, counts, pacing, plans: [...plans] };
  })) as Outcome;
}

import { backToRead, dedupeDone } from '../../src/imports/lifecycle';
import { importDedupeRest } from '../../src/metrics/import-pipeline';
import {
  discardTables,
  hasRows,
  md5RangeCondition,
  MERGE_PARTS,
  mergePartDdl,
  partSizes,
  renewTable,
  sliceTable,
  slicesOf,
  type MergePart,
  type Staging,
} from './staging';
import { PacedLane, Pacer } from './pace';
import { StagingLostError } from './errors';
import { type MergeProgress, type Pipeline, type Step } from './state';

/**
 * Phase 2, dedupe: keep the last row per email (highest row_no), set-based, into the merge table
 * with a dense `seq` so merge batches are ranges of it. The merge table comes in MERGE_PARTS parts
 * by email_md5 range, built at the same time on separate backends (staging.ts). The counts, the
 * move to `merge` and the drop of the raw rows then commit together in one transaction; a crash
 * anywhere before that commit just reruns the phase, which builds every part again. Returns the
 * merge, with the row count now known, as the next phase.
 *
 * `seq` follows email_md5 order rather than file order. The result is the same (one row per
 * email, no order between emails matters), but it costs one sort instead of two (DISTINCT ON
 * already sorts by email_md5) and each merge batch then covers one narrow key range of the
 * contacts primary key, which keeps the index pages a batch touches hot (1M rows inserted in
 * random order took 1.6× as long as in key order).
 *
 * The merge table is UNLOGGED like the raw rows: a logged one costs a WAL copy of every row, or
 * under wal_level=minimal an fsync of the whole table at this commit (0.5 s per 1M rows, about
 * 5 GB to flush for a 25M-row file). A PostgreSQL crash during the merge empties it; ensureStaged
 * notices before a merge (re)starts, every merge batch checks its row count, and the file is read
 * again. The merge table is a pure function of the pinned file, so the rebuilt one numbers every
 * email as before and the merge goes on from its committed checkpoint with its counters as they are.
 */
export async function dedupePhase(p: Pipeline): Promise<Step> {
  const { job } = p;
  const counts = await dedupe(p, p.staging).catch(async (e: unknown) => {
    if (!(e instanceof StagingLostError)) throw e;
    await stagingLost(p, 'dedupe');
    throw e; // transient: the retry runs the read phase again
  });
  p.log('import deduplicated', {
    importId: job.id,
    rowCount: counts.kept,
    duplicateInFile: counts.staged - counts.kept,
    rebuilt: counts.rebuilt,
    slices: counts.slices,
    ...(counts.pacedPieces > 0 ? { pacedPieces: counts.pacedPieces, restedMs: counts.restedMs } : {}),
  });
  if (!counts.moved) return { phase: 'stopped' }; // failed by another hand meanwhile
  importDedupeRest.inc(counts.restedMs / 1000);
  // A rebuilt merge table goes on from the checkpoint the merge under way committed.
  return { phase: 'merge', rowCount: counts.kept, checkpoint: counts.rebuilt ? job.checkpoint : 0 };
}

interface DedupeCounts {
  staged: number;
  kept: number;
  rebuilt: boolean;
  /** how many slices the staged rows came in (staging.ts: stagingSlices) */
  slices: number;
  /** whether the import moved on to its merge (not when it stopped being a running dedupe) */
  moved: boolean;
  /** statements run one at a time and rested after while the API was busy (pace.ts), and the rests */
  pacedPieces: number;
  restedMs: number;
}

async function dedupe(p: Pipeline, s: Staging): Promise<DedupeCounts> {
  const { job } = p;
  const t = s.tables;
  // An earlier dedupe of this import committed (rowCount is known) and its merge table was lost
  // since: rebuild it for the merge under way, leaving checkpoint and counters alone.
  const rebuilt = job.rowCount !== null;
  const [staging] = await p.sql<{ staged_count: number | null; rejects_recorded: boolean }[]>`
    select staged_count, rejects_recorded from contact_imports
    where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid`;
  const staged = Number(staging?.staged_count ?? -1);
  if (staged < 0 || (await hasRows(p.sql, t.rows, job.accountId)) !== staged > 0)
    throw new StagingLostError(`staged rows of import ${job.id} were lost`);

  // The parts at the same time, each on its own connection and committed on its own. Until the
  // commit below moves the import to `merge`, a rerun builds them all again from the raw rows.
  const slices = await slicesOf(p.sql, t.rows);
  const pacer = new Pacer(p);
  const lane = new PacedLane(pacer);
  const built = await Promise.allSettled(
    t.parts.map((part, k) => buildPart(p, s, lane, part, partSources(t.rows, part, k, slices))),
  );
  const failed = built.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  const kept = built.reduce((sum, r) => sum + (r as PromiseFulfilledResult<number>).value, 0);
  if (rebuilt && kept !== Number(job.rowCount)) {
    throw new Error(`import ${job.id}: the file read again deduplicates to ${kept} rows, not ${job.rowCount}`);
  }
  // The report's duplicate rows are found in the staged rows while the merge runs (duplicates.ts),
  // which drops them after; without duplicates (or the report) nothing needs them any more.
  const keepRows = staging?.rejects_recorded === true && staged > kept;
  return p.sql.begin(async (tx) => {
    const moved = await dedupeDone(tx, job.accountId, job.id, { staged, kept, rebuilt });
    if (!keepRows) await discardTables(tx, s, [t.rows], staged);
    return { staged, kept, rebuilt, slices, moved, pacedPieces: pacer.pieces, restedMs: pacer.restedMs };
  });
}

/**
 * One part of the merge table: the last staged row of every email in the part's email_md5 range,
 * numbered in email_md5 order. Returns its row count.
 */
async function buildPart(
  p: Pipeline,
  s: Staging,
  lane: PacedLane,
  part: MergePart,
  sources: string[],
): Promise<number> {
  return p.sql.begin(async (tx) => {
    // The sort of the staged rows (wide: attributes and brands ride along) is the whole cost. With
    // the server's 64 MB it spills to disk from ~200,000 rows on; 1 GB sorts a slice (or a part of
    // an unsliced file) in memory. Only for this transaction: MERGE_PARTS of them per running import.
    await tx`set local work_mem = '1GB'`;
    await tx`set local jit = off`; // compiling costs more than it saves on this plan
    // Made (or emptied, in a pool), then filled with one statement per source for the account, which
    // on a cluster runs whole on the node of its shards (the window's order is the DISTINCT ON's: one sort).
    await renewTable(tx, s, part.table, [mergePartDdl(part.table)]);
    // Sources follow email_md5 order, so numbering each on from the rows before it numbers the part.
    // The attributes are staged as JSON text (rowsTableDdl) and parsed here, once per email kept.
    let count = 0;
    // Each slice's sort, and the key's, is a piece: while the API is busy one part's at a time (pace.ts).
    for (const source of sources) {
      const filled = await lane.run(() =>
        tx.unsafe(
          `
        insert into ${part.table}
        select account_id, $2::int8 + row_number() over (order by email_md5), email_md5, row_no, email,
               attributes::jsonb, brand_ids, attribute_count
        from (
          select distinct on (email_md5) account_id, email_md5, row_no, email, attributes, brand_ids, attribute_count
          from ${source}
          order by email_md5, row_no desc
        ) last_per_email`,
          [p.job.accountId, count],
        ),
      );
      count += filled.count;
    }
    if (!s.pooled) await lane.run(() => tx.unsafe(`alter table ${part.table} add primary key (account_id, seq)`));
    // Real statistics, so the merge plans its joins for batches of this size, not for a guess. Of
    // the columns its plans filter on only: the attributes' and brands' statistics (wide values,
    // compared and counted in the sample) steer no plan, and took 0.37 of the 0.62 s all columns
    // took for a 985,000-row part (psql, bench/findings/2026-11-27-merge-parts-analyze.md).
    await tx.unsafe(`analyze ${part.table} (account_id, seq, email_md5)`);
    return count;
  });
}

/**
 * Where part `k` finds its staged rows, as `<table> where <condition on $1, the account>`, in
 * email_md5 order: its own slices of a sliced staging table (staging.ts), or else the one table
 * filtered to the part's email_md5 range.
 */
function partSources(rows: string, part: MergePart, k: number, slices: number): string[] {
  const account = 'account_id = $1::uuid';
  if (slices > 1) {
    const per = slices / MERGE_PARTS;
    return Array.from({ length: per }, (_, i) => `${sliceTable(rows, k * per + i)} where ${account}`);
  }
  return [`${rows} where ${account}${md5RangeCondition(part.from, part.to)}`];
}

/**
 * Before a merge (re)starts: the merge table must still hold its rows. A PostgreSQL crash empties
 * an unlogged table as a whole, so the parts' highest seqs (a probe each, whatever the size) must
 * add up to rowCount. When they do, the merge goes on; when they do not, the import goes back to
 * `read` with its checkpoint, counters and percentage kept, and this run reads the file again
 * and dedupe rebuilds the same parts (the merge table is a pure function of the pinned file).
 */
export async function ensureStaged(p: Pipeline, merge: MergeProgress): Promise<Step> {
  const { rowCount, checkpoint } = merge;
  if (checkpoint >= rowCount) return { phase: 'merge', rowCount, checkpoint }; // nothing left to merge
  const sizes = await partSizes(p.sql, p.staging.tables, p.job.accountId);
  if (sizes && sizes.reduce((a, b) => a + b, 0) === rowCount) return { phase: 'merge', rowCount, checkpoint };
  await stagingLost(p, 'merge');
  return { phase: 'read' };
}

export async function stagingLost(p: Pipeline, from: 'dedupe' | 'merge'): Promise<void> {
  const { job } = p;
  await backToRead(p.sql, job.accountId, job.id, from);
  p.log('import staging lost; reading the file again', { importId: job.id, from, checkpoint: job.checkpoint });
}

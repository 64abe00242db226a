import { MERGE_ROWS_PER_SECOND } from '../../src/imports/retry-after';
import { stagingLost } from './dedupe';
import { recordDuplicatesOnce } from './duplicates';
import { withAccountHold } from './merge/account-hold';
import type { Part } from './merge/batch';
import { mergeBatches } from './merge/schedule';
import { partStatements } from './merge/sql-files';
import { ensureRejectsTable } from './rejects';
import { PaceTurn } from './pace';
import { ReportDraft } from './report';
import { partSizes } from './staging';
import { StagingLostError } from './errors';
import { loadReportFacts, type MergeProgress, type Pipeline, type Step } from './state';

/**
 * Phase 3, merge: the deduplicated rows applied to the account's contacts in batches of
 * `batchSize`, each one transaction that also moves the import's checkpoint and counters
 * (merge/batch.ts), several in flight at once but committed in seq order (merge/schedule.ts),
 * with the account held for the whole phase (merge/account-hold.ts). Returns finish as the next
 * phase, or stopped when the import stopped being a running merge under us (failed or finished
 * by another hand; the run then leaves it alone), or yielded when it gave way between batches.
 *
 * The import's seq runs through the merge table's parts in order (dedupe.ts); every batch but the
 * last is exactly `batchSize` rows of that order, so `percentComplete` moves in the spec's steps,
 * and a batch that meets a part's end goes on into the next part.
 *
 * Beside the batches, the report's duplicate rows are recorded (duplicates.ts) and the report is
 * drafted after them (report.ts); the phase ends when both its batches and that scan have.
 */
export async function mergePhase(p: Pipeline, merge: MergeProgress): Promise<Step> {
  const { job } = p;
  const { rowCount, checkpoint } = merge;
  if (checkpoint >= rowCount) {
    await recordDuplicatesOnce(p).catch((e: unknown) => readAgainIfLost(p, e));
    return { phase: 'finish' };
  }
  const t = p.staging.tables;
  const sizes = await partSizes(p.sql, t, job.accountId);
  if (!sizes || sizes.reduce((a, b) => a + b, 0) !== rowCount) {
    throw new StagingLostError(`the merge table of import ${job.id} does not hold its ${rowCount} rows`);
  }
  // The read made it; an import read by an older worker has none, and records nothing in it.
  await ensureRejectsTable(p.sql, p.staging, job.accountId);
  const { rejectsRecorded } = await loadReportFacts(p.sql, job);
  // A pooled staging is a cluster's (staging-pool.ts: stagingFor asked once for the run).
  const form = { distributed: p.staging.pooled, recordSkips: rejectsRecorded, publishEvents: job.publishEvents };
  const parts: Part[] = [];
  let offset = 0;
  for (const [k, part] of t.parts.entries()) {
    const size = sizes[k]!;
    parts.push({
      offset,
      size,
      statements: await partStatements({ merge: part.table, plan: part.plan, rejects: t.rejects }, form),
      plan: part.plan,
    });
    offset += size;
  }

  const duplicates = recordDuplicatesOnce(p);
  p.reportDraft ??= new ReportDraft(p, duplicates);
  const seconds = Math.ceil((rowCount - checkpoint) / MERGE_ROWS_PER_SECOND);
  const batches = withAccountHold(p, seconds, () =>
    mergeBatches(
      { p, rowCount, parts, recordSkips: rejectsRecorded, turn: new PaceTurn() },
      checkpoint,
      Math.max(1, p.mergeConcurrency),
    ),
  );
  // Both run to their end before the phase returns or throws: nothing of this run may go on after it.
  const [merged, scanned] = await Promise.allSettled([batches, duplicates]);
  if (merged.status === 'rejected') throw merged.reason;
  if (scanned.status === 'rejected') await readAgainIfLost(p, scanned.reason);
  return merged.value === 'merged' ? { phase: 'finish' } : { phase: merged.value };
}

/** Staged rows lost before the duplicate rows were found: the import goes back to its read. Throws `e`. */
async function readAgainIfLost(p: Pipeline, e: unknown): Promise<never> {
  if (e instanceof StagingLostError) await stagingLost(p, 'merge');
  throw e;
}

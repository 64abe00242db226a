import { isSuspended } from '../../src/auth/suspension';
import type { Config } from '../../src/config';
import { type Sql, isDatabaseUnavailable, importRunLock } from '../../src/db';
import { markImportFailed } from '../../src/imports/lifecycle';
import type { ApiLoadNow } from '../../src/imports/api-load';
import { importPhaseDuration, importsFinished } from '../../src/metrics/import-pipeline';
import type { ObjectStore } from '../../src/storage/store';
import { dedupePhase, ensureStaged } from './dedupe';
import { cleanup, finishPhase } from './finish';
import { mergePhase } from './merge';
import { readPhase } from './read';
import { stagingFor } from './staging-pool';
import { watchSuspension } from './suspension-watch';
import { ImportBusyError, ImportFileError, StagingLostError, UnrecoverableImportError } from './errors';
import { diskFullWait } from './disk-full-wait';
import { isDiskFull } from '../../src/storage/disk-full';
import { loadImport, type ImportJob, type Pipeline, type Step } from './state';

export { ImportBusyError, UnrecoverableImportError } from './errors';

export interface ImportDeps {
  sql: Sql;
  storage: ObjectStore;
  config: Config;
  log?: (msg: string, fields?: object) => void;
  /** Pipeline.giveWay: asked between phases and merge batches; absent, the run goes to its end. */
  giveWay?: () => boolean;
  /** Pipeline.sharing: whether other imports run in this process. */
  sharing?: () => boolean;
  /** Pipeline.apiBusy: whether the API said it is busy (src/imports/api-load.ts). */
  apiBusy?: () => boolean;
  /** Pipeline.apiLoad: the busy API's load and harm (src/imports/api-load.ts). */
  apiLoad?: () => ApiLoadNow;
  /** Pipeline.eventsCommitted: after a merge batch committed events. */
  eventsCommitted?: () => void;
  /** How often the run looks whether its account was suspended (SUSPENSION_LOOK_MS; tests shorten it). */
  suspensionLookMs?: number;
}

/**
 * `ended`: the import is final (or was never this run's to run); `yielded`: the run gave way to
 * another account's import at a checkpoint, and the import is to be run again from there;
 * `suspended`: the account is suspended, and the import (not started, or stopped at a checkpoint)
 * waits, still open, to be run again from there once the account is unsuspended.
 */
export type RunEnd = 'ended' | 'yielded' | 'suspended';

/**
 * Runs (or resumes) one contact import to its end: read → dedupe → merge → finish.
 *
 * Safe under at-least-once delivery: each phase's progress commits together with the phase's
 * effects, so a worker killed anywhere and started again continues from the last commit and every
 * row is applied exactly once. A run for an import already `success` or `failed` only cleans up.
 *
 * Throws UnrecoverableImportError (a BullMQ UnrecoverableError) after marking the import `failed`
 * when the file can never import (header, encoding, empty). Any other error is transient
 * (connection loss, deadlock, object store trouble): the import stays `importing` and the job
 * should be retried. ImportBusyError means another worker is running this import right now.
 *
 * When the database goes away mid-run (src/db/unavailable.ts), or a crash emptied the staging, the
 * run waits until PostgreSQL answers and starts over from the committed state itself, for up to
 * DATABASE_WAIT_MS, before it throws for the queue to retry. A full disk (src/storage/disk-full.ts)
 * is waited out the same way, for up to DISK_FULL_WAIT_MS (disk-full-wait.ts).
 */
export async function runImport(deps: ImportDeps, accountId: string, importId: string): Promise<RunEnd> {
  const log = deps.log ?? (() => {});
  const deadline = Date.now() + DATABASE_WAIT_MS;
  let diskFull: { since: number; tries: number } | undefined;
  for (;;) {
    try {
      return await runOnce(deps, accountId, importId, log);
    } catch (e) {
      if (isDiskFull(e)) {
        diskFull ??= { since: Date.now(), tries: 0 };
        if (diskFull.tries === 0)
          log('import waits: a disk is full; it is tried again from its last commit until space is freed', {
            importId,
            error: String(e),
          });
        await diskFullWait(e, diskFull.since, diskFull.tries++);
        continue;
      }
      diskFull = undefined;
      if (!(isDatabaseUnavailable(e) || e instanceof StagingLostError) || Date.now() >= deadline) throw e;
      log('import interrupted by a database fault; resuming from its last commit once PostgreSQL answers', {
        importId,
        error: String(e),
      });
      await databaseAnswers(deps.sql, deadline, e);
    }
  }
}

/**
 * How long one delivery of the job waits for a database that went away (a restart, a failover, a
 * killed connection) and resumes the import itself, before it gives the job back to the queue's
 * retries. A restart takes a few seconds; the queue's first retry would come 5 s after the failure
 * and spend one of the job's attempts, and a second failure 10 s after that.
 */
const DATABASE_WAIT_MS = 60_000;

/** Resolves once the database answers again; throws `lost` if it does not before `deadline`. */
async function databaseAnswers(sql: Sql, deadline: number, lost: unknown): Promise<void> {
  for (let pause = 100; Date.now() < deadline; pause = Math.min(pause * 2, 1_000)) {
    await Bun.sleep(pause);
    if (await sql`select 1`.then(() => true).catch(() => false)) return;
  }
  throw lost;
}

async function runOnce(deps: ImportDeps, accountId: string, importId: string, log: Pipeline['log']): Promise<RunEnd> {
  const { sql, storage } = deps;
  // The staging pool of a cluster keeps as many sets free as the worker runs imports (staging-pool.ts).
  const keepFree = deps.config.workerConcurrency;
  const seen = await loadImport(sql, accountId, importId);
  if (!seen) {
    log('import not found', { accountId, importId });
    return 'ended';
  }
  if (seen.status === 'success' || seen.status === 'failed') {
    await cleanup(sql, storage, seen, log, keepFree);
    return 'ended';
  }
  if (seen.status === 'awaiting-upload') {
    log('import has no file yet', { importId });
    return 'ended';
  }

  // One connection for the whole run: it holds the import's session lock (so a second delivery of
  // the job cannot run the same import concurrently, and a killed worker's lock dies with its
  // connection) and carries the read phase's COPY, which must not run inside a transaction.
  const conn = await sql.reserve();
  const lockKey = importRunLock(conn, importId);
  try {
    const [lock] = await conn<{ locked: boolean }[]>`select pg_try_advisory_lock(${lockKey}) as locked`;
    if (!lock?.locked) throw new ImportBusyError(`contact import ${importId} is being run by another worker`);
    try {
      const job = await loadImport(sql, accountId, importId);
      if (!job || job.status === 'awaiting-upload') return 'ended';
      if (job.status === 'success' || job.status === 'failed') {
        await cleanup(sql, storage, job, log, keepFree);
        return 'ended';
      }
      if (await isSuspended(sql, accountId)) {
        log('import waits: its account is suspended', { importId });
        return 'suspended';
      }
      return await runWatched(deps, conn, job, log);
    } finally {
      await conn`select pg_advisory_unlock(${lockKey})`.catch(() => {});
    }
  } finally {
    conn.release();
  }
}

/**
 * Runs the pipeline of a loaded, open import under its lock. A suspension of the account stops it at
 * its next checkpoint (after the read, between phases, between merge batches: where everything it
 * did is committed), as giving way to another account does; the read of the file is one pass and
 * goes to its end first.
 */
async function runWatched(
  deps: ImportDeps,
  conn: Pipeline['conn'],
  job: ImportJob,
  log: Pipeline['log'],
): Promise<RunEnd> {
  const { sql, storage } = deps;
  const { accountId, id: importId } = job;
  const keepFree = deps.config.workerConcurrency;
  const watch = watchSuspension(sql, accountId, deps.suspensionLookMs);
  try {
    const { importBatchSize: batchSize, importMergeConcurrency: mergeConcurrency } = deps.config;
    const { rejectedRowsReport: report, rejectedRowsRetentionDays: reportRetentionDays } = deps.config;
    const { importPace: pace } = deps.config;
    const p: Pipeline = {
      sql,
      conn,
      store: storage,
      job,
      staging: await stagingFor(sql, job),
      batchSize,
      mergeConcurrency,
      report,
      reportRetentionDays,
      log,
      giveWay: () => watch.suspended() || (deps.giveWay?.() ?? false),
      sharing: deps.sharing,
      apiBusy: deps.apiBusy,
      apiLoad: deps.apiLoad,
      eventsCommitted: deps.eventsCommitted,
      pace,
    };
    let end: Step;
    try {
      end = await runPhases(p).finally(() => p.reportDraft?.discard());
    } catch (e) {
      if (!(e instanceof ImportFileError)) throw e;
      await markImportFailed(sql, accountId, importId, e.message);
      importsFinished.inc({ status: 'failed' });
      await cleanup(sql, storage, job, log, keepFree);
      log('import failed', { importId, reason: e.message });
      throw new UnrecoverableImportError(importId, e.message, { cause: e });
    }
    if (end.phase === 'yielded') {
      if (!watch.suspended()) return 'yielded';
      log('import stopped at a checkpoint: its account is suspended', { importId });
      return 'suspended';
    }
    if (end.phase === 'done') {
      importsFinished.inc({ status: 'success' });
      await cleanup(sql, storage, job, log, keepFree);
    } else {
      // Stopped: another hand finished or failed the import while this run held it.
      const now = await loadImport(sql, accountId, importId);
      if (now?.status === 'success' || now?.status === 'failed') await cleanup(sql, storage, now, log, keepFree);
    }
    return 'ended';
  } finally {
    watch.stop();
  }
}

/**
 * Runs phase after phase, each returning the next, from where the committed state stands. Between
 * two phases after the read (each committed its end), the run may give way (Pipeline.giveWay).
 */
async function runPhases(p: Pipeline): Promise<Step> {
  let step = firstStep(p.job);
  let ran = false;
  while (step.phase !== 'done' && step.phase !== 'stopped' && step.phase !== 'yielded') {
    if (ran && (step.phase === 'dedupe' || step.phase === 'merge') && p.giveWay?.()) {
      p.log('import gives way', { importId: p.job.id, before: step.phase });
      return { phase: 'yielded' };
    }
    if (step.phase === 'read' && p.reportDraft) {
      // Back to the read (its staging was lost): what was rejected is recorded anew.
      await p.reportDraft.discard();
      p.reportDraft = undefined;
    }
    const timer = importPhaseDuration.startTimer({ phase: step.phase });
    const next = await runPhase(p, step);
    // Only a phase that returned its successor is timed: one that gave way is not over.
    if (next.phase !== 'yielded') timer();
    // A resume only checks the staging: the run has not moved the import on yet.
    if (step.phase !== 'resume') ran = true;
    step = next;
  }
  return step;
}

/** Where a run starts: the phase the import's row is in (a merge is checked before it goes on). */
function firstStep(job: Readonly<ImportJob>): Step {
  if (job.status === 'uploaded' || job.phase === null || job.phase === 'read') return { phase: 'read' };
  if (job.phase === 'dedupe') return { phase: 'dedupe' };
  if (job.phase === 'finish') return { phase: 'finish' };
  return { phase: 'resume', rowCount: Number(job.rowCount ?? 0), checkpoint: job.checkpoint };
}

function runPhase(p: Pipeline, step: Exclude<Step, { phase: 'done' | 'stopped' | 'yielded' }>): Promise<Step> {
  switch (step.phase) {
    case 'read':
      return readPhase(p);
    case 'dedupe':
      return dedupePhase(p);
    case 'resume':
      return ensureStaged(p, step); // may send it back to read
    case 'merge':
      return mergePhase(p, step);
    case 'finish':
      return finishPhase(p);
  }
}

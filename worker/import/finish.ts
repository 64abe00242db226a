import { releaseContactWrites } from '../../src/contacts/write-guard';
import type { Sql } from '../../src/db';
import { finishImport } from '../../src/imports/lifecycle';
import { rejectedRowsObjectKey } from '../../src/storage';
import type { ObjectStore } from '../../src/storage/store';
import { writeReport } from './report';
import { releaseStaging } from './staging-pool';
import type { ImportJob, Pipeline, Step } from './state';

/**
 * Phase 4, finish: the rejected-rows report written to the object store (report.ts), then
 * `success` with completedAt, the report's key, and the bulk-operation hold lifted, in one commit
 * (finishImport). Only a merge that accounted for every row can finish.
 */
export async function finishPhase(p: Pipeline): Promise<Step> {
  const started = performance.now();
  const report = await writeReport(p);
  const reported = performance.now();
  await finishImport(p.sql, p.job.accountId, p.job.id, report);
  // Each step's time: a finish that lags the last batch says in the log which step it waited on.
  const ms = (t: number) => Math.round(t);
  p.log('import finished', {
    importId: p.job.id,
    reportMs: ms(reported - started),
    commitMs: ms(performance.now() - reported),
  });
  return { phase: 'done' };
}

/**
 * After a final status: let the staging go, the rejected rows with it (the report, if any, is in
 * the object store by now; staging-pool.ts: a cluster's set is emptied and freed for the next
 * import, `keepFree` the pool's size), and remove the uploaded object. Both are idempotent and run
 * after the commit, so a crash in between only leaves garbage the next run (which sees the final
 * status and does nothing but this) removes. A failure here never fails the import.
 */
export async function cleanup(
  sql: Sql,
  store: ObjectStore,
  job: ImportJob,
  log: Pipeline['log'],
  keepFree: number,
): Promise<void> {
  // A final import holds no contact writes. Its hold normally went in the commit that ended it, but
  // a run that held the account after another hand had failed the import (or died right after)
  // would leave one behind, and the account's single writes would get 409 for good.
  await releaseContactWrites(sql, job.accountId, job.id).catch((e) =>
    log('import cleanup: hold not released', { importId: job.id, error: String(e) }),
  );
  try {
    await releaseStaging(sql, job.id, keepFree);
  } catch (e) {
    log('import cleanup: staging not dropped', { importId: job.id, error: String(e) });
  }
  // A report written by a run whose finish did not take (the import was failed meanwhile) is no one's.
  if (job.status === 'failed') await store.remove(rejectedRowsObjectKey(job.accountId, job.id)).catch(() => {});
  if (!job.objectKey) return;
  try {
    await store.remove(job.objectKey);
  } catch (e) {
    log('import cleanup: object not removed', { importId: job.id, key: job.objectKey, error: String(e) });
  }
}

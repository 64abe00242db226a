import { releaseContactWrites } from '../../src/contacts/write-guard';
import type { Sql } from '../../src/db';
import type { ObjectStore } from '../../src/storage/store';
import { dropStaging } from './staging';
import type { ImportJob, Pipeline } from './state';

/**
 * Phase 4, finish: `success` with completedAt, percentComplete gone (it exists only while
 * importing), and the bulk-operation hold lifted, in one commit. Only a merge that accounted for
 * every row can finish.
 */
export async function finishPhase(p: Pipeline): Promise<void> {
  const { job } = p;
  await p.sql.begin(async (tx) => {
    await tx`
      update contact_imports
      set status = 'success', completed_at = now(), percent_complete = null, phase = 'finish', updated_at = now()
      where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid
        and status = 'importing' and phase = 'merge' and checkpoint >= coalesce(row_count, 0)`;
    await releaseContactWrites(tx, job.accountId, job.id);
  });
  job.status = 'success';
  job.phase = 'finish';
  p.log('import finished', { importId: job.id });
}

/**
 * After a final status: drop the staging tables and remove the object. Both are idempotent and run
 * after the commit, so a crash in between only leaves garbage the next run (which sees the final
 * status and does nothing but this) removes. A failure here never fails the import.
 */
export async function cleanup(sql: Sql, store: ObjectStore, job: ImportJob, log: Pipeline['log']): Promise<void> {
  try {
    await dropStaging(sql, job.id);
  } catch (e) {
    log('import cleanup: staging not dropped', { importId: job.id, error: String(e) });
  }
  if (!job.objectKey) return;
  try {
    await store.remove(job.objectKey);
  } catch (e) {
    log('import cleanup: object not removed', { importId: job.id, key: job.objectKey, error: String(e) });
  }
}

import { drainContactWrites, holdContactWrites } from '../../../src/contacts/write-guard';
import { accountMergeLock } from '../../../src/db';
import type { Pipeline } from '../state';

/**
 * Runs `merge` holding the import's account for the whole merge phase.
 *
 * The run's reserved connection holds a session lock per account, so two imports of one account
 * never merge at once (their batches could meet on a contact). Single contact writes are drained
 * once (the account's lock exclusive, after the bulk_operations row committed); batches then hold
 * it shared, which still keeps `attribute create` out, and every later single write sees the row
 * and gets 409 with an estimate `seconds` ahead. The hold ends with the import, in the commit that
 * finishes or fails it (src/imports/lifecycle.ts).
 */
export async function withAccountHold<T>(p: Pipeline, seconds: number, merge: () => Promise<T>): Promise<T> {
  const { sql, conn, job } = p;
  const mergeLock = accountMergeLock(conn, job.accountId);
  const [free] = await conn<{ locked: boolean }[]>`select pg_try_advisory_lock(${mergeLock}) as locked`;
  if (!free?.locked) {
    p.log('import merge waits for another import of the account', { importId: job.id });
    await conn`select pg_advisory_lock(${mergeLock})`;
  }
  try {
    // Own commit, before the first batch: from now on single contact writes get 409 with an estimate.
    await holdContactWrites(sql, job.accountId, job.id, 'contact-import', seconds);
    await drainContactWrites(sql, job.accountId, job.id);
    return await merge();
  } finally {
    // A broken connection took the lock with it; the caller releases the connection either way.
    await conn`select pg_advisory_unlock(${mergeLock})`.catch(() => {});
  }
}

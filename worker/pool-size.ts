import type { Config } from '../src/config';
import { MERGE_PARTS } from './import/staging';

/**
 * Connections the worker's pool needs: each running import reserves one for its whole run and,
 * meanwhile, takes more from the pool: MERGE_PARTS + 1 at once for the dedupe parts (and the
 * scan for the report's duplicate rows beside them), then IMPORT_MERGE_CONCURRENCY for merge
 * batches, one for that scan beside them and one for the plan tables' VACUUM (merge/plan-vacuum.ts);
 * the upload sweeper needs one more, and the event sequencer and the webhook relay (worker/events)
 * two, so that their short statements never wait behind the imports' nor hold an import up (more
 * of the relay's deliveries at once share them); the contact export (worker/exports) two, its COPY
 * and the short statements beside it (lease, progress, the count); on a Citus cluster the staging
 * pool's upkeep one (worker/import/staging-pool.ts), which holds it while it makes sets. With
 * fewer, the parts and batches wait for each other (slower), and with one connection per import an
 * import waits on itself forever. So
 * DATABASE_POOL_SIZE is raised to this when it is smaller.
 */
export function workerPoolSize(
  config: Pick<Config, 'databasePoolSize' | 'workerConcurrency' | 'importMergeConcurrency'>,
): number {
  const needed = config.workerConcurrency * (1 + Math.max(MERGE_PARTS + 1, config.importMergeConcurrency + 2)) + 6;
  return Math.max(config.databasePoolSize, needed);
}

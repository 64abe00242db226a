import type { Sql } from '../../src/db';
import { stagingTables, type StagingTables } from '../../worker/import/staging';

/**
 * The staging tables of an import as its runs find them: on a Citus cluster those of the pooled set
 * it holds (worker/import/staging-pool.ts), else its own, named for it.
 */
export async function stagingOf(sql: Sql, importId: string): Promise<StagingTables> {
  const [held] = await sql<{ id: string }[]>`select id from staging_sets where import_id = ${importId}::uuid`;
  return stagingTables(held?.id ?? importId);
}

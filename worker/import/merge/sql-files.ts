import { join } from 'node:path';

const SQL_DIR = join(import.meta.dir, '../../../sql/merge');

/** The statements of one merge batch over one part of the merge table. */
export interface PartStatements {
  /** the general batch: every strategy, row by row against the contacts (merge-batch.sql) */
  merge: string;
  /** the fast path of a batch whose key range holds no contact and no seed: all adds (insert-batch.sql) */
  insert: string;
  /** whether the batch's key range meets a contact or a seed of the account (batch-clash.sql) */
  clash: string;
}

/** The batch statements for one part of an import's merge table, and the import's rejected rows. */
export async function partStatements(table: string, rejects: string): Promise<PartStatements> {
  return {
    merge: await mergeStatement('merge-batch.sql', table, rejects),
    insert: await mergeStatement('insert-batch.sql', table, rejects),
    clash: await mergeStatement('batch-clash.sql', table, rejects),
  };
}

const sqlTexts = new Map<string, Promise<string>>();

/**
 * A statement of sql/merge for one import's merge table and rejected rows (each file is read once
 * per process). Both names are built from the import id alone (worker/import/staging.ts).
 */
async function mergeStatement(file: string, table: string, rejects: string): Promise<string> {
  let text = sqlTexts.get(file);
  if (!text) sqlTexts.set(file, (text = Bun.file(join(SQL_DIR, file)).text()));
  return (await text).replaceAll(':"merge_table"', table).replaceAll(':"rejects_table"', rejects);
}

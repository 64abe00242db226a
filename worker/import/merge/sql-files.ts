import { join } from 'node:path';

const SQL_DIR = join(import.meta.dir, '../../../sql/merge');

/** The statements of one merge batch over one part of the merge table, in the order they run. */
export interface PartStatements {
  /** the general batch: every strategy, row by row against the contacts (merge-batch.sql) */
  merge: { plan: string; counts: string; skips: string; write: string; events: string; clear: string };
  /** the fast path of a batch whose key range holds no contact and no seed: all adds (insert-batch.sql) */
  insert: { insert: string; events: string };
  /** whether the batch's key range meets a contact or a seed of the account (batch-clash.sql) */
  clash: string;
}

/** The staging tables one part's statements name (worker/import/staging.ts). */
export interface PartTables {
  merge: string;
  plan: string;
  rejects: string;
}

/** The batch statements for one part of an import's merge table. */
export async function partStatements(tables: PartTables): Promise<PartStatements> {
  const merge = await sections('merge-batch.sql', tables, ['plan', 'counts', 'skips', 'write', 'events', 'clear']);
  const insert = await sections('insert-batch.sql', tables, ['insert', 'events']);
  return {
    merge: {
      plan: merge.plan!,
      counts: merge.counts!,
      skips: merge.skips!,
      write: merge.write!,
      events: merge.events!,
      clear: merge.clear!,
    },
    insert: { insert: insert.insert!, events: insert.events! },
    clash: await statement('batch-clash.sql', tables),
  };
}

const sqlTexts = new Map<string, Promise<string>>();

/**
 * A file of sql/merge for one part's tables (each file is read once per process). The names are
 * built from the import id alone (worker/import/staging.ts).
 */
async function statement(file: string, t: PartTables): Promise<string> {
  let text = sqlTexts.get(file);
  if (!text) sqlTexts.set(file, (text = Bun.file(join(SQL_DIR, file)).text()));
  return (await text)
    .replaceAll(':"merge_table"', t.merge)
    .replaceAll(':"plan_table"', t.plan)
    .replaceAll(':"rejects_table"', t.rejects);
}

/** The statements of a file of several, each after its `-- name: <name>` line; exactly `names`. */
async function sections(file: string, t: PartTables, names: string[]): Promise<Record<string, string>> {
  const parts = (await statement(file, t)).split(/^-- name: *(\w+) *$/m);
  const found: Record<string, string> = {};
  for (let k = 1; k < parts.length; k += 2) found[parts[k]!] = parts[k + 1]!.trim().replace(/;$/, '');
  const got = Object.keys(found).sort().join();
  if (got !== [...names].sort().join()) throw new Error(`sql/merge/${file} names statements ${got}, not ${names}`);
  return found;
}

import { join } from 'node:path';

const SQL_DIR = join(import.meta.dir, '../../../sql/merge');

/** The general batch as statements run one after another, reading the part's plan table (merge-batch.sql). */
export interface SplitMerge {
  plan: string;
  counts: string;
  skips: string;
  write: string;
  events: string;
  /** the brands the rows assign and drop, for the contact tallies */
  gains: string;
  drops: string;
  clear: string;
}

/** The statements of one merge batch over one part of the merge table. */
export interface PartStatements {
  /**
   * The general batch, every strategy, row by row against the contacts (merge-batch.sql): on one
   * PostgreSQL one statement (`fused`), on a Citus cluster statements around a plan table (`split`).
   */
  merge: { fused: string; split?: undefined } | { split: SplitMerge; fused?: undefined };
  /** the fast path of a batch whose key range holds no contact and no seed: all adds (insert-batch.sql) */
  insert: { insert: string; events: string; gains: string };
  /** whether the batch's key range meets contacts, and seeds, of the account (batch-clash.sql) */
  clash: string;
}

/** The staging tables one part's statements name (worker/import/staging.ts). */
export interface PartTables {
  merge: string;
  plan: string;
  rejects: string;
}

/** How the import's batches run: on a cluster or not, what they record beside the contacts. */
export interface MergeForm {
  /** on a Citus cluster, which routes no INSERT in a WITH clause */
  distributed: boolean;
  /** the skipped rows recorded for the rejected-rows report */
  recordSkips: boolean;
  /** brand-subscribe events written */
  publishEvents: boolean;
}

/** What a batch's decision takes beyond its range (merge-batch.sql `decide`, $4-$7). */
export const decideParams = (
  job: { strategy: string; overwriteBrands: boolean; restoreDisabled: boolean },
  seeds: boolean,
) => [job.strategy, job.overwriteBrands, job.restoreDisabled, seeds];

/**
 * The fused batch's parameters: the decision's $1-$7, then the import id and method the write and
 * the events take as their own $4 and $5.
 */
export const fusedParams = (
  range: unknown[],
  job: { strategy: string; overwriteBrands: boolean; restoreDisabled: boolean; id: string; method: string },
  seeds: boolean,
) => [...range, ...decideParams(job, seeds), job.id, job.method];

const PLAN_COLUMNS =
  'account_id, seq, row_no, email_md5, email, attributes, brand_ids, assigned_brand_ids, skip_reason, outcome, ' +
  'dropped_brand_ids, reenabled';

/** The batch statements for one part of an import's merge table. */
export async function partStatements(tables: PartTables, form: MergeForm): Promise<PartStatements> {
  const names = ['decide', 'counts', 'skips', 'write', 'events', 'gains', 'drops', 'clear'];
  const insert = await sections('insert-batch.sql', tables, ['insert', 'events', 'gains']);
  const common = {
    insert: { insert: insert.insert!, events: insert.events!, gains: insert.gains! },
    clash: await statement('batch-clash.sql', tables),
  };
  if (form.distributed) {
    const s = await sections('merge-batch.sql', tables, names);
    const split = {
      plan: `insert into ${tables.plan} (${PLAN_COLUMNS})\n${s.decide!}`,
      counts: s.counts!,
      skips: s.skips!,
      write: s.write!,
      events: s.events!,
      gains: s.gains!,
      drops: s.drops!,
      clear: s.clear!,
    };
    return { merge: { split }, ...common };
  }
  // The plan is the CTE `plan`; the writes' import id and method move from $4, $5 to $8, $9. The
  // brands assigned and dropped, for the contact tallies, come out as objects of brand id → rows: the
  // assigned ones from the events when they are published (the same counts), else from `gains`.
  const s = await sections('merge-batch.sql', { ...tables, plan: 'plan' }, names);
  const own = (text: string) => text.replace(/\$([45])(?!\d)/g, (_, k: string) => `$${Number(k) + 4}`);
  const gained = form.publishEvents ? 'published' : 'gained';
  const ctes = [
    `plan as materialized (\n${s.decide!}\n)`,
    form.recordSkips && `skipped as (\n${s.skips!}\n)`,
    `written as (\n${own(s.write!)}\nreturning 1\n)`,
    form.publishEvents ? `published as (\n${own(s.events!)}\n)` : `gained as (\n${s.gains!}\n)`,
    `dropped as (\n${s.drops!}\n)`,
  ].filter(Boolean);
  const events = form.publishEvents ? '(select coalesce(sum(n), 0) from published)' : '0';
  const fused = `with ${ctes.join(',\n')}
select batch.*, (select count(*) from written)::int8 as written, ${events}::int8 as events,
       (select jsonb_object_agg(brand_id, n) from ${gained}) as gained,
       (select jsonb_object_agg(brand_id, n) from dropped) as dropped
from (\n${s.counts!}\n) batch`;
  return { merge: { fused }, ...common };
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

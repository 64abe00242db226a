/**
 * A fresh benchmark account, created with SQL like the test fixtures: a full-scope key, the
 * schema attributes of a file shape (in its columns' order) and its brands (the wide shape's; the
 * narrow shape has no Brand column and its account no brands).
 */
import { cacheChanged } from '../../src/auth/cache';
import { newKey } from '../../src/auth/keys';
import { ALL_SCOPES } from '../../src/auth/scopes';
import type { Sql } from '../../src/db';
import { SHAPES, type Shape } from './shapes';

export interface BenchAccount {
  id: string;
  key: string;
  /** brand ids by index into the shape's brands (BRANDS of dataset.ts for the wide shape) */
  brandIds: string[];
}

export async function createBenchAccount(
  sql: Sql,
  label: string,
  shape: Pick<Shape, 'attributes' | 'brands'> = SHAPES.wide,
): Promise<BenchAccount> {
  return sql.begin(async (tx) => {
    const [account] = await tx<{ id: string }[]>`insert into accounts (name) values (${`bench ${label}`}) returning id`;
    const id = account!.id;
    const k = newKey();
    await tx`
      insert into api_keys (account_id, id, secret_sha256, scopes)
      values (${id}, ${k.id}, ${k.secretSha256}, ${tx.array([...ALL_SCOPES])})`;
    // As the admin CLI does: the account's key counter moves (and its cache_versions row exists).
    await cacheChanged(tx, id, 'api_keys', k.id);
    for (const a of shape.attributes)
      await tx`insert into schema_attributes (account_id, name, type) values (${id}, ${a.name}, ${a.type})`;
    const brandIds: string[] = [];
    for (const name of shape.brands) {
      const [b] = await tx<
        { id: string }[]
      >`insert into brands (account_id, name) values (${id}, ${name}) returning id`;
      brandIds.push(b!.id);
    }
    return { id, key: k.key, brandIds };
  }) as Promise<BenchAccount>;
}

/**
 * On a configured (shared) database, imports that an earlier, interrupted bench run left open would
 * be picked up by the worker and compete with this run: mark them failed, as an operator would.
 */
export async function abandonOpenBenchImports(sql: Sql): Promise<number> {
  return sql.begin(async (tx) => {
    const rows = await tx<{ account_id: string; id: string }[]>`
      update contact_imports i
      set status = 'failed', failure_reason = 'Abandoned: the benchmark run that started it was interrupted.',
          percent_complete = null, updated_at = now()
      from accounts a
      where a.id = i.account_id and a.name like 'bench %' and i.status in ('awaiting-upload', 'uploaded', 'importing')
      returning i.account_id, i.id`;
    for (const r of rows) await tx`delete from bulk_operations where account_id = ${r.account_id} and id = ${r.id}`;
    return rows.length;
  }) as Promise<number>;
}

/**
 * Accounts' contacts (and brand events) gone, with the table as a run before it found it:
 * - when the accounts hold every contact and event, both tables are truncated: instant, and the disk
 *   given back at once (a 25M-row account's delete and vacuum take minutes and keep its pages);
 * - otherwise deleted, then `vacuum (analyze) contacts`: the freed pages at the table's end are given
 *   back, so the next run inserts into the same table as this one did, the statistics are the same
 *   for each, and a step needs disk for one run's contacts at a time. Then a checkpoint: the
 *   delete's and the vacuum's dirty pages are written now, not by the next run's backends or by a
 *   checkpoint in the middle of it (runs of one setting were 6-12 % apart).
 * A step with more than one account of its own drops them together: one left behind would turn the
 * other's truncate into a delete (the mixed step's 25M imported contacts beside its load's account).
 */
export async function dropAccountContacts(
  sql: Sql,
  accounts: string | readonly string[],
): Promise<'truncated' | 'deleted'> {
  const ids = typeof accounts === 'string' ? [accounts] : [...accounts];
  if (await truncateIfOnly(sql, ids)) return 'truncated';
  // Tallied here as a whole: the DELETE trigger would append a delta per contact
  // (sql/migrations/0019_contact_tallies.sql).
  await sql.begin(async (tx) => {
    await tx.unsafe(`set local citus.propagate_set_commands to 'local'; set local contact_tallies.explicit to on`);
    await tx`delete from contacts where account_id = any(${tx.array(ids)}::uuid[])`;
    await tx`delete from contact_tallies where account_id = any(${tx.array(ids)}::uuid[])`;
  });
  await sql`delete from brand_subscribe_events where account_id = any(${sql.array(ids)}::uuid[])`;
  await sql.unsafe('vacuum (analyze) contacts');
  // CHECKPOINT needs a superuser (or pg_checkpoint) on a configured database: without, the run goes on.
  await sql.unsafe('checkpoint').catch(() => {});
  return 'deleted';
}

/**
 * Truncates contacts and brand_subscribe_events (and the tallies counting them) when no account but
 * `ids` has a row in either, under a lock that keeps other writers out between the look and the
 * truncate. Both primary keys lead with account_id, so each look is an index probe into one gap
 * between the accounts (before the first, between two, after the last), whatever the table size.
 */
async function truncateIfOnly(sql: Sql, ids: readonly string[]): Promise<boolean> {
  const sorted = [...ids].sort();
  return sql.begin(async (tx) => {
    await tx`lock table contacts, brand_subscribe_events in access exclusive mode`;
    for (const table of ['contacts', 'brand_subscribe_events'])
      for (let k = 0; k <= sorted.length; k++) {
        const [after, before] = [sorted[k - 1], sorted[k]];
        const gap = [after && tx`account_id > ${after}::uuid`, before && tx`account_id < ${before}::uuid`].filter(
          (c) => !!c,
        );
        const where = gap.length === 2 ? tx`${gap[0]!} and ${gap[1]!}` : gap[0]!;
        const [r] = await tx<{ found: boolean }[]>`select exists (select 1 from ${tx(table)} where ${where}) as found`;
        if (r?.found !== false) return false;
      }
    await tx`truncate contacts, brand_subscribe_events, contact_tallies`;
    return true;
  }) as Promise<boolean>;
}

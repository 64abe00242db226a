import type { Sql } from '../db';

/** Sets one statement removes at most; the account comes back for the rest in the same pass. */
const SETS_PER_DELETE = 5_000;
const ACCOUNTS_PER_PASS = 1_000;

/**
 * Removes the events past EVENT_RETENTION_DAYS from the feed, as a prefix of each account's
 * positions: up to the first set still within retention (a set that committed late may sit after
 * a newer one). `pruned_through` moves with it to the last set removed, so a cursor before it is
 * known to have lost events and the feed without a cursor starts after it. Sets not placed yet are
 * never removed. Returns the accounts whose feed moved, with how far.
 */
export async function pruneEvents(sql: Sql, retentionDays: number): Promise<{ accountId: string; through: number }[]> {
  const accounts = await sql<{ account_id: string }[]>`
    select distinct account_id from brand_subscribe_events
    where position is not null and created_at < now() - make_interval(days => ${retentionDays})
    limit ${ACCOUNTS_PER_PASS}`;
  const moved: { accountId: string; through: number }[] = [];
  for (const { account_id } of accounts) {
    const through = await pruneAccount(sql, account_id, retentionDays);
    if (through !== undefined) moved.push({ accountId: account_id, through });
  }
  return moved;
}

async function pruneAccount(sql: Sql, accountId: string, retentionDays: number): Promise<number | undefined> {
  let through: number | undefined;
  for (;;) {
    const step = await sql.begin(async (tx) => {
      // The head's lock keeps the sequencer of this account out for the moment it takes.
      const [head] = await tx<{ pruned_through: string }[]>`
        select pruned_through from event_feed_heads where account_id = ${accountId} for update`;
      if (!head) return undefined;
      const [kept] = await tx<{ first: string | null }[]>`
        select min(position) as first from brand_subscribe_events
        where account_id = ${accountId} and position is not null
          and created_at >= now() - make_interval(days => ${retentionDays})`;
      // The next sets by count, not the next positions: positions may leave gaps (a restore moves the
      // head on by 10^12, docs/backups.md), which one step crosses.
      const [next] = await tx<{ last: string | null; n: number }[]>`
        select max(position) as last, count(*)::int as n from (
          select position from brand_subscribe_events
          where account_id = ${accountId} and position > ${head.pruned_through}::int8
            and (${kept?.first ?? null}::int8 is null or position < ${kept?.first ?? null}::int8)
          order by position
          limit ${SETS_PER_DELETE}
        ) s`;
      if (!next || next.last === null) return undefined;
      // pruned_through is the last set removed: a cursor after it, in a gap before the next set, lost nothing.
      const last = Number(next.last);
      await tx`
        delete from brand_subscribe_events
        where account_id = ${accountId} and position > ${head.pruned_through}::int8 and position <= ${last}`;
      await tx`update event_feed_heads set pruned_through = ${last} where account_id = ${accountId}`;
      return { last, done: next.n < SETS_PER_DELETE };
    });
    if (!step) return through;
    through = step.last;
    if (step.done) return through;
  }
}

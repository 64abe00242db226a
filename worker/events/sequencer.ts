import type { Sql } from '../../src/db';

/** Sets one account's pass gives positions to at most; the loop comes back at once for the rest. */
const SETS_PER_PASS = 10_000;
const ACCOUNTS_PER_PASS = 1_000;

/**
 * Gives the committed, unplaced brand-subscribe event sets of every account their feed positions
 * (sql/migrations/0011_event_feed.sql says why positions, not ids). Returns whether it left work
 * for another pass; `placed` hears of every account that got positions (the relay's cue). Any
 * number of workers run it: an account another one is placing is skipped.
 */
export async function sequenceEvents(sql: Sql, placed?: (accountId: string) => void): Promise<boolean> {
  const accounts = await sql<{ account_id: string }[]>`
    select distinct account_id from brand_subscribe_events where position is null limit ${ACCOUNTS_PER_PASS}`;
  let more = accounts.length === ACCOUNTS_PER_PASS;
  for (const { account_id } of accounts) {
    const { n, full } = await sequenceAccount(sql, account_id);
    if (n > 0) placed?.(account_id);
    if (full) more = true;
  }
  return more;
}

/**
 * One account's placing, in one transaction under its head row's lock: the next pass for the
 * account starts after this one committed, so it sees these positions and every set committed
 * before it, and positions become visible in their order.
 */
async function sequenceAccount(sql: Sql, accountId: string): Promise<{ n: number; full: boolean }> {
  const result = await sql.begin(async (tx) => {
    let [head] = await tx<{ sequenced_through: number }[]>`
      select sequenced_through from event_feed_heads where account_id = ${accountId} for update skip locked`;
    if (!head) {
      const [made] = await tx<{ sequenced_through: number }[]>`
        insert into event_feed_heads (account_id) values (${accountId})
        on conflict (account_id) do nothing
        returning sequenced_through`;
      // Someone else made it, and holds it now or just did: their pass places these sets.
      if (!made) return { n: 0, full: false };
      head = made;
    }
    const base = Number(head.sequenced_through);
    // Row by row (returning), not counted in a WITH: Citus routes no modifying CTE. In the order of
    // their transactions' start, then of their ids: on a Citus cluster each node draws ids from a
    // range of its own, and an account's sets are written through more than one node (the API's
    // own and the account's: src/db/account-nodes.ts), so ids alone would put a later set first.
    const placed = await tx`
      update brand_subscribe_events e set position = ${base}::int8 + next.n
      from (
        select id, row_number() over (order by created_at, id) as n
        from brand_subscribe_events
        where account_id = ${accountId} and position is null
        order by created_at, id
        limit ${SETS_PER_PASS}
      ) next
      where e.account_id = ${accountId} and e.id = next.id
      returning 1`;
    const n = placed.length;
    if (n > 0) await tx`update event_feed_heads set sequenced_through = ${base + n} where account_id = ${accountId}`;
    return { n, full: n === SETS_PER_PASS };
  });
  return result as { n: number; full: boolean };
}

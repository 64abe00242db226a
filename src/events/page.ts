import { join } from 'node:path';
import type { AnySql } from '../db';
import { after, type Cursor, type FeedAt } from './cursor';

const PAGE_SQL = join(import.meta.dir, '../../sql/events/page.sql');
let pageText: Promise<string> | undefined;

export interface EventPage {
  /** The events as JSON texts joined by commas: the feed and the webhook bodies splice them in unparsed. */
  events: string;
  /** How many events `events` holds. */
  count: number;
  /** The last event the page passed (its own cursor when the page is empty). */
  next: Cursor;
}

/**
 * One page of an account's feed (sql/events/page.sql): up to `limit` events after `from`, and no
 * later than `through` when given. The one reader of events that the feed and the relay share.
 */
export async function readPage(
  sql: AnySql,
  accountId: string,
  from: Cursor,
  limit: number,
  through?: Cursor,
): Promise<EventPage> {
  pageText ??= Bun.file(PAGE_SQL).text();
  const [page] = await sql.unsafe<
    { position: string | number; place: number; size: number; events: string | null; shown: number }[]
  >(await pageText, [accountId, from.position, from.index, limit, through?.position ?? null, through?.index ?? null], {
    prepare: true,
  });
  if (!page) return { events: '', count: 0, next: from };
  // The end of a set is written as the start of the next position (src/events/cursor.ts).
  const position = Number(page.position);
  const next = page.place >= page.size ? after(position) : { position, index: page.place };
  return { events: page.events ?? '', count: page.shown, next };
}

/**
 * The account's feed as `at` meets it: how far it is placed and pruned, and the size of the set at
 * `at`'s position (none without `at`). One statement on the account's rows: on a cluster both
 * tables are distributed by account, so it runs on the account's node.
 */
export async function feedAt(sql: AnySql, accountId: string, at: Cursor | undefined): Promise<FeedAt> {
  const [row] = await sql<{ sequenced_through: string; pruned_through: string; size: number | null }[]>`
    select h.sequenced_through, h.pruned_through, e.size
    from event_feed_heads h
    left join brand_subscribe_events e on e.account_id = h.account_id and e.position = ${at?.position ?? 0}
    where h.account_id = ${accountId}`;
  // No head yet: nothing was ever placed for the account.
  return {
    sequencedThrough: Number(row?.sequenced_through ?? 0),
    prunedThrough: Number(row?.pruned_through ?? 0),
    setSize: row?.size ?? null,
  };
}

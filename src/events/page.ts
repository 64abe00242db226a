import { join } from 'node:path';
import type { AnySql } from '../db';
import { after, type Cursor } from './cursor';

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

/** How far the retention sweep removed the account's feed: a cursor before it has lost events. */
export async function prunedThrough(sql: AnySql, accountId: string): Promise<number> {
  const [head] = await sql<{ pruned_through: number }[]>`
    select pruned_through from event_feed_heads where account_id = ${accountId}`;
  return Number(head?.pruned_through ?? 0);
}

import { join } from 'node:path';
import type { AnySql } from '../db';
import type { Cursor } from './cursor';

const PAGE_SQL = join(import.meta.dir, '../../sql/events/page.sql');
let pageText: Promise<string> | undefined;

export interface EventPage {
  /** The events, each as its JSON text (the feed and the webhook bodies splice them in unparsed). */
  events: string[];
  /** The last event the page passed (its own cursor when the page is empty). */
  next: Cursor;
}

/**
 * One page of an account's feed (sql/events/page.sql): up to `limit` events after `after`, and no
 * later than `through` when given. The one reader of events that the feed and the relay share.
 */
export async function readPage(
  sql: AnySql,
  accountId: string,
  after: Cursor,
  limit: number,
  through?: Cursor,
): Promise<EventPage> {
  pageText ??= Bun.file(PAGE_SQL).text();
  const rows = await sql.unsafe<{ position: string | number; md5: string; event: string | null }[]>(
    await pageText,
    [accountId, after.position, after.md5, limit, through?.position ?? null, through?.md5 ?? null],
    { prepare: true },
  );
  const last = rows.at(-1);
  const events: string[] = [];
  for (const r of rows) if (r.event !== null) events.push(r.event);
  return { events, next: last ? { position: Number(last.position), md5: last.md5 } : after };
}

/** How far the retention sweep removed the account's feed: a cursor before it has lost events. */
export async function prunedThrough(sql: AnySql, accountId: string): Promise<number> {
  const [head] = await sql<{ pruned_through: number }[]>`
    select pruned_through from event_feed_heads where account_id = ${accountId}`;
  return Number(head?.pruned_through ?? 0);
}

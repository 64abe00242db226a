import { join } from 'node:path';
import type { Tx } from '../db';

const ERASE_SQL = join(import.meta.dir, '../../sql/events/erase.sql');
let eraseText: Promise<string> | undefined;

/**
 * How far a set's created_at may lie outside its contact's [created_at, updated_at]: on a cluster
 * the two can be stamped by different nodes' clocks. Wide enough for clocks kept by NTP.
 */
const CLOCK_MARGIN_MS = 10_000;

/** The erased contacts, as the DELETE returned them. */
export interface ErasedContact {
  email_md5: string;
  created_at: Date;
  updated_at: Date;
}

/**
 * Takes erased contacts out of the account's recorded brand-subscribe events (sql/events/erase.sql),
 * in the erasure's transaction, after their rows were deleted. The one writer of that rule: an
 * erased event is a null at the same place of both arrays, which the feed and the relay skip.
 */
export async function eraseFromEvents(tx: Tx, accountId: string, erased: readonly ErasedContact[]): Promise<void> {
  if (erased.length === 0) return;
  const since = Math.min(...erased.map((c) => c.created_at.getTime())) - CLOCK_MARGIN_MS;
  const until = Math.max(...erased.map((c) => c.updated_at.getTime())) + CLOCK_MARGIN_MS;
  eraseText ??= Bun.file(ERASE_SQL).text();
  await tx.unsafe(
    await eraseText,
    [accountId, erased.map((c) => c.email_md5), new Date(since).toISOString(), new Date(until).toISOString()],
    { prepare: true },
  );
}

import { join } from 'node:path';
import type { Tx } from '../db';

const ERASE_SQL = join(import.meta.dir, '../../sql/events/erase.sql');
let eraseText: Promise<string> | undefined;

/**
 * How far a set's created_at may lie outside its contact's [created_at, updated_at]. On one
 * PostgreSQL they are equal (the same transaction's now()); on a cluster the two can be stamped by
 * different nodes, each at the start of its part of the transaction and by its own clock. Wide
 * enough for that and for clocks kept by NTP; every second of it is another second of an import's
 * sets to read per erasure.
 */
const CLOCK_MARGIN_MS = 5_000;

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
  const ranges = mergedRanges(
    erased.map((c) => [c.created_at.getTime() - CLOCK_MARGIN_MS, c.updated_at.getTime() + CLOCK_MARGIN_MS]),
  );
  const iso = (ms: number) => new Date(ms).toISOString();
  eraseText ??= Bun.file(ERASE_SQL).text();
  await tx.unsafe(
    await eraseText,
    [accountId, erased.map((c) => c.email_md5), ranges.map(([s]) => iso(s)), ranges.map(([, u]) => iso(u))],
    { prepare: true },
  );
}

/**
 * The ranges of created_at to read, overlapping ones merged: contacts of one import batch share
 * theirs, and a set is read once however many of its contacts go. Not one range from the first
 * contact's creation to the last's: a thousand contacts of one long import would read all of it.
 */
export function mergedRanges(ranges: readonly (readonly [number, number])[]): [number, number][] {
  const merged: [number, number][] = [];
  for (const [since, until] of [...ranges].sort((a, b) => a[0] - b[0])) {
    const last = merged.at(-1);
    if (last && since <= last[1]) last[1] = Math.max(last[1], until);
    else merged.push([since, until]);
  }
  return merged;
}

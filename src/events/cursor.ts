import { invalidParameter } from '../errors';

/**
 * A place in an account's feed: `index` events of the set at `position` passed, and every event of
 * the positions before it. Events are ordered by their set's position, then by their place in the
 * set's array, which never changes (an erased address leaves a null behind, not a gap). A place at
 * the end of a set is written as the start of the next position, so that a cursor's position
 * tells whether the retention removed events it had not passed. Clients see an opaque string.
 */
export interface Cursor {
  position: number;
  index: number;
}

/** The place before every event after position `position`. */
export const after = (position: number): Cursor => ({ position: position + 1, index: 0 });

const TEXT = /^v2\.([1-9][0-9]{0,14})\.(0|[1-9][0-9]{0,8})$/;

export function formatCursor(c: Cursor): string {
  return Buffer.from(`v2.${c.position}.${c.index}`).toString('base64url');
}

/** The 400 of a cursor the feed did not give out, however it was found out. */
export const notGivenOut = (parameter: string) =>
  invalidParameter(parameter, `${parameter} is not a cursor this feed gave out; pass a "next" value unchanged.`);

/** The cursor a client sent back, by its spelling; anything else is a 400 naming `parameter`. */
export function parseCursor(text: string, parameter = 'after'): Cursor {
  const decoded = /^[A-Za-z0-9_-]{1,60}$/.test(text) ? Buffer.from(text, 'base64url').toString('latin1') : '';
  const m = TEXT.exec(decoded);
  const cursor = m && { position: Number(m[1]), index: Number(m[2]) };
  if (!cursor || formatCursor(cursor) !== text) throw notGivenOut(parameter);
  return cursor;
}

/** An account's feed as a cursor is checked against it (src/events/page.ts, feedAt). */
export interface FeedAt {
  /** The last position placed; 0 before the first. */
  sequencedThrough: number;
  /** How far the retention removed the feed. */
  prunedThrough: number;
  /** How many events the set at the cursor's position holds, when there is one. */
  setSize: number | null;
}

/**
 * Whether the feed can have given out `c`, a cursor that is well spelled but unsigned (its text is
 * the place itself, so a client can write any): a place no later than the end of what is placed
 * (the start of the position after the last, which a reader that has seen everything holds while
 * it waits for more), and, inside a set, before that set's end (an end of set is always written as
 * the start of the next position). A cursor past the end would read nothing now and, once the feed
 * grew past it, skip every event in between; so it is refused, as a misspelled one is.
 */
export function gaveOut(c: Cursor, feed: FeedAt): boolean {
  if (c.position > feed.sequencedThrough + 1) return false;
  if (c.index === 0) return true;
  return c.position <= feed.sequencedThrough && feed.setSize !== null && c.index < feed.setSize;
}

/**
 * Whether the retention removed events a reader at `c` had not passed: the sweep removed every
 * position up to `prunedThrough` (src/events/retention.ts). The feed answers 410, the relay moves on.
 */
export function lostToRetention(c: Cursor, prunedThrough: number): boolean {
  return before(c, after(prunedThrough));
}

/** Whether `a` comes before `b` in feed order. */
export function before(a: Cursor, b: Cursor): boolean {
  return a.position < b.position || (a.position === b.position && a.index < b.index);
}

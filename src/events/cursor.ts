import { invalidParameter } from '../errors';

/**
 * A place in an account's feed: the last event passed. Events are ordered by their set's position,
 * then by md5 within the set (the sets' md5s are stored sorted); `LAST_MD5` means "every event of
 * that position". Clients see it as an opaque string.
 */
export interface Cursor {
  position: number;
  md5: string;
}

/** Above every md5: a cursor with it has passed its whole position. */
export const LAST_MD5 = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

/** The place before every event from `position` on. */
export const startOf = (position: number): Cursor => ({ position, md5: LAST_MD5 });

const TEXT = /^v1\.(0|[1-9][0-9]{0,14})\.([0-9a-f]{32})$/;

export function formatCursor(c: Cursor): string {
  return Buffer.from(`v1.${c.position}.${c.md5.replaceAll('-', '')}`).toString('base64url');
}

/** The cursor a client sent back; anything else is a 400 naming `parameter`. */
export function parseCursor(text: string, parameter = 'after'): Cursor {
  const decoded = /^[A-Za-z0-9_-]{1,80}$/.test(text) ? Buffer.from(text, 'base64url').toString('latin1') : '';
  const m = TEXT.exec(decoded);
  if (!m || formatCursor(fromMatch(m)) !== text)
    throw invalidParameter(
      parameter,
      `${parameter} is not a cursor this feed gave out; pass a "next" value unchanged.`,
    );
  return fromMatch(m);
}

function fromMatch(m: RegExpExecArray): Cursor {
  const hex = m[2]!;
  const md5 = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { position: Number(m[1]), md5 };
}

/** Whether `a` comes before `b` in feed order. */
export function before(a: Cursor, b: Cursor): boolean {
  return a.position < b.position || (a.position === b.position && a.md5 < b.md5);
}

import { createHash } from 'node:crypto';
import { invalidField } from '../errors';

/**
 * A search page's `next`: the last emailMd5 the page gave and a digest of the filter it was given
 * for. Pages are read by keyset (`email_md5 > after`, in the primary key's order), so any page costs
 * what the first does. The digest binds the cursor to its filter: sent back with another filter (none
 * included), the place it marks would mean nothing, and that is a 400 rather than a silently wrong
 * page. Clients see an opaque string.
 */
export interface SearchCursor {
  /** emailMd5 (32 lowercase hex) of the last contact already given */
  after: string;
  /** filterDigest of the search's filter */
  filter: string;
}

const TEXT = /^s1\.([0-9a-f]{32})\.([0-9a-f]{16})$/;

/** 16 hex of sha256 of filter.ts's filterKey: which filter a cursor belongs to. */
export function filterDigest(filterKey: string): string {
  return createHash('sha256').update(filterKey).digest('hex').slice(0, 16);
}

export function formatSearchCursor(c: SearchCursor): string {
  return Buffer.from(`s1.${c.after}.${c.filter}`).toString('base64url');
}

/** The cursor a client sent back with a filter of this digest; any other text is a 400 at `/cursor`. */
export function parseSearchCursor(text: unknown, digest: string): SearchCursor {
  if (typeof text !== 'string')
    throw invalidField('/cursor', 'cursor must be a string: a "next" value of an earlier page, unchanged.');
  const decoded = /^[A-Za-z0-9_-]{1,100}$/.test(text) ? Buffer.from(text, 'base64url').toString('latin1') : '';
  const m = TEXT.exec(decoded);
  if (!m) throw invalidField('/cursor', 'cursor is not a "next" value this API gave out; pass it back unchanged.');
  if (m[2] !== digest)
    throw invalidField(
      '/cursor',
      'cursor belongs to a search with another filter: send it with the filter of the search that gave it.',
    );
  return { after: m[1]!, filter: m[2]! };
}

import { Elysia } from 'elysia';
import type { Deps } from '../deps';
import { ApiError } from '../errors';
import { authOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { rejectRepeatedParams, rejectUnknownParams } from '../http/pagination';
import { after, formatCursor, gaveOut, lostToRetention, notGivenOut, parseCursor } from './cursor';
import { EventPage, EventsQuery } from './model';
import { feedAt, readPage } from './page';

const DEFAULT_LIMIT = 100;

export function eventRoutes({ sql, config }: Deps) {
  return new Elysia({ prefix: '/v1/events', detail: { tags: ['Events'] } }).get(
    '',
    async ({ request, query }) => {
      rejectRepeatedParams(request.url);
      rejectUnknownParams(query, ['after', 'limit']);
      const accountId = authOf(request).accountId;
      const asked = query.after === undefined ? undefined : parseCursor(query.after);
      const feed = await feedAt(sql, accountId, asked);
      const pruned = feed.prunedThrough;
      if (asked && lostToRetention(asked, pruned)) {
        const detail =
          `The cursor in after is older than the event retention (${config.eventRetentionDays} days): ` +
          'events after it were removed. Start again without after, from the oldest event kept.';
        throw new ApiError('conflict_error', detail, [{ parameter: 'after', detail }], undefined, {
          status: 410,
          title: 'Cursor expired',
        });
      }
      if (asked && !gaveOut(asked, feed)) throw notGivenOut('after');
      const page = await readPage(sql, accountId, asked ?? after(pruned), query.limit ?? DEFAULT_LIMIT);
      // The events come as JSON texts from PostgreSQL and are spliced in, not parsed and written again.
      const body = `{"data":[${page.events}],"next":${JSON.stringify(formatCursor(page.next))}}`;
      return new Response(body, { headers: { 'content-type': 'application/json' } });
    },
    {
      query: EventsQuery,
      response: { 200: EventPage, ...errorResponses(400, 410) },
      detail: {
        summary: 'List brand-subscribe events',
        description:
          'An extension beyond the contract. ' +
          "The account's brand-subscribe events in the order they became visible. No event is skipped and none " +
          'repeats across pages, whatever order concurrent writes and import batches commit in. An event of a ' +
          'contact erased since is not shown. Scope `events:read`.',
      },
    },
  );
}

import { Elysia, t } from 'elysia';
import type { Deps } from '../deps';
import { authOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { assertBodyShape } from '../http/body-shape';
import { assertPageSize, BODY_FIELDS, ContactCount, ContactStats, CountBody, SearchBody, SearchPage } from './model';
import { countContacts, searchContacts } from './service';
import { contactStats } from './stats';

const EXTENSION = 'An extension beyond the contract. Needs the scope `contacts:read`. ';
const FILTER_ERRORS =
  '400 `invalid_request_error` with the pointer of the filter node at fault (`/filter/and/2/op` for an ' +
  "operator the attribute's type does not take, `/filter/and/2/attribute` for an unknown attribute, " +
  '`/filter/and/2/value` for a value of the wrong type, a Brand id that is not the account’s included, ' +
  '`/filter` for a filter over 5 levels deep or over 50 leaves). ';
const TIMEOUT = '504 when the statement runs past SEARCH_TIMEOUT_MS: it is cancelled in the database. ';

/** Finding contacts: searches by filter, exact counts and the account's tallies (docs/searching.md). */
export function contactSearchRoutes(deps: Deps) {
  const { sql, config } = deps;
  return new Elysia({ prefix: '/v1', detail: { tags: ['Contact search'] } })
    .post(
      '/contact-searches',
      ({ request, body }) => searchContacts(sql, config.searchTimeoutMs, authOf(request).accountId, body ?? {}),
      {
        transform: ({ body }) => {
          assertBodyShape(body, BODY_FIELDS.search, true);
          assertPageSize(body);
        },
        body: t.Optional(SearchBody),
        response: { 200: SearchPage, ...errorResponses(400, 504) },
        detail: {
          summary: 'Search contacts by filter',
          description:
            EXTENSION +
            'One page of the contacts that pass `filter`, by emailMd5 ascending; `next` continues the same ' +
            'search (keyset: every page costs what the first does). ' +
            FILTER_ERRORS +
            '400 with pointer `/cursor` for a cursor that is not one of this search’s (another filter, none ' +
            'included) or is malformed. ' +
            TIMEOUT,
        },
      },
    )
    .post(
      '/contact-counts',
      ({ request, body }) => countContacts(sql, config.searchTimeoutMs, authOf(request).accountId, body ?? {}),
      {
        transform: ({ body }) => assertBodyShape(body, BODY_FIELDS.count, true),
        body: t.Optional(CountBody),
        response: { 200: ContactCount, ...errorResponses(400, 504) },
        detail: {
          summary: 'Count contacts by filter',
          description: EXTENSION + 'How many contacts pass `filter`, exactly. ' + FILTER_ERRORS + TIMEOUT,
        },
      },
    )
    .get('/contact-stats', ({ request }) => contactStats(sql, authOf(request).accountId), {
      response: { 200: ContactStats, ...errorResponses() },
      detail: {
        summary: "The account's contact tallies",
        description:
          EXTENSION +
          'Contacts in all, enabled and disabled, and per brand of the account: exact and live (every write ' +
          'is counted by the next request).',
      },
    });
}

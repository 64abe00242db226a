import { Elysia, t } from 'elysia';
import type { Deps } from '../deps';
import { assertBodyShape } from '../http/body-shape';
import { authOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { eraseContact, eraseContacts } from './erase';
import { EmailMd5Params, EraseContactsBody, ErasureCounts } from './model';

const EXTENSION = 'An extension beyond the contract. ';

const WHAT_GOES =
  'The contact row goes whole (address, attributes, brand assignments, hidden fields), and its ' +
  'address leaves the recorded brand-subscribe events: the feed and webhooks no longer show them. ' +
  'A later create of the address makes a new contact (201). Each erasure is recorded for the ' +
  'operator (account, emailMd5, key id, time; never the address: `bun run admin erasures`). 409 ' +
  '`operation_in_progress` with Retry-After while a bulk contact operation or a schema change of ' +
  'the account runs, as for other single writes. docs/exports-and-erasure.md ("Erasure") says ' +
  'where else an address can remain and for how long.';

/** Erasure, the right to be forgotten: one contact by its path, or up to 1000 by their md5s. */
export function contactErasureRoutes({ sql }: Deps) {
  return new Elysia()
    .delete(
      '/v1/contacts/:emailMd5',
      async ({ request, params, set }) => {
        await eraseContact(sql, authOf(request), params.emailMd5);
        set.status = 204;
      },
      {
        params: EmailMd5Params,
        response: { 204: t.Void({ description: 'Erased; no body.' }), ...errorResponses(400, 404, 409) },
        detail: {
          tags: ['Contacts'],
          summary: 'Erase a contact (the right to be forgotten)',
          description:
            EXTENSION +
            'Needs the scope `contacts:write`. ' +
            WHAT_GOES +
            ' 404 `not_found_error` when the account has no such contact.',
        },
      },
    )
    .post('/v1/contact-erasures', ({ request, body }) => eraseContacts(sql, authOf(request), body.emailMd5s), {
      transform: ({ body }) => assertBodyShape(body, { allowed: ['emailMd5s'], objects: [] }),
      body: EraseContactsBody,
      response: { 200: ErasureCounts, ...errorResponses(400, 409) },
      detail: {
        tags: ['Contacts'],
        summary: 'Erase contacts by emailMd5, up to 1000 at once',
        description:
          EXTENSION +
          'Needs the scope `contacts:write`. All in one transaction: ' +
          WHAT_GOES +
          ' emailMd5s with no contact are counted in `notFoundCount`. 400 `invalid_request_error` with ' +
          'pointer `/emailMd5s/<index>` for an entry that is not 32 hex digits or repeats an earlier ' +
          'one (case-insensitively), `/emailMd5s` for an empty list or one over 1000; then nothing is ' +
          'erased.',
      },
    });
}

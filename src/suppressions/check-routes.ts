import { Elysia, t } from 'elysia';
import type { Deps } from '../deps';
import { authOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { assertBodyShape } from '../http/body-shape';
import { checkAddresses } from './check';

const EXTENSION = 'An extension beyond the contract. ';
export const MAX_CHECKED_EMAILS = 1000;

export const SuppressionCheckBody = t.Object(
  {
    emails: t.Array(t.String({ error: 'Every entry of emails must be a string.' }), {
      minItems: 1,
      maxItems: MAX_CHECKED_EMAILS,
      description: `1 to ${MAX_CHECKED_EMAILS} email addresses; repeats allowed, each answered in its place.`,
      error: `emails must be an array of 1 to ${MAX_CHECKED_EMAILS} strings.`,
    }),
  },
  { error: 'The request body must be an object with an emails array.' },
);

export const SuppressionCheckResult = t.Object({
  data: t.Array(
    t.Object({
      email: t.String({ description: 'The entry as sent.' }),
      suppressed: t.Boolean({ description: 'Whether any suppression list of the account holds the address.' }),
      suppressionListIds: t.Array(t.String({ format: 'uuid' }), {
        description: 'The lists that hold it, in the order the lists were created; empty when none.',
      }),
    }),
    { description: 'One entry per entry of emails, in the same order.' },
  ),
});

export function suppressionCheckRoutes({ sql }: Deps) {
  return new Elysia({ prefix: '/v1/suppression-checks', detail: { tags: ['Suppression lists'] } }).post(
    '',
    async ({ request, body }) => ({ data: await checkAddresses(sql, authOf(request).accountId, body.emails) }),
    {
      body: SuppressionCheckBody,
      // Elysia's normaliser drops unknown fields silently; a typo must be a 400 instead.
      transform: ({ body }) => assertBodyShape(body, { allowed: ['emails'], objects: [] }),
      response: { 200: SuppressionCheckResult, ...errorResponses(400) },
      detail: {
        summary: 'Check addresses against every suppression list',
        description:
          EXTENSION +
          'Needs the scope `suppressions:read`. Checks each address against every suppression list of the ' +
          'account, global and offer-attached lists included, each by its format: a `plain text` list by the ' +
          'trimmed, lowercased address (as add-records stores it), an `md5` or `sha512` list by the digest ' +
          'of the trimmed, lowercased address. 400 `invalid_request_error` with pointer `/emails/<index>` ' +
          'for each entry that is not an email address (nothing is checked), `/emails` for a list that is ' +
          `empty, longer than ${MAX_CHECKED_EMAILS} or not an array.`,
      },
    },
  );
}

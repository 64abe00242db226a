import { t } from 'elysia';
import { invalidField } from '../errors';
import { Contact } from '../contacts/model';
import { FilterField } from './filter-schema';

export const MAX_PAGE_SIZE = 1000;

export const SearchBody = t.Object(
  {
    filter: t.Optional(FilterField('Only contacts that pass it; every contact of the account without it.')),
    pageSize: t.Optional(
      t.Integer({
        minimum: 1,
        maximum: MAX_PAGE_SIZE,
        error: `pageSize must be an integer from 1 to ${MAX_PAGE_SIZE}.`,
        description: `1 to ${MAX_PAGE_SIZE}; default 100.`,
      }),
    ),
    cursor: t.Optional(
      t.String({ description: 'A `next` of an earlier page of the same search (the same filter), unchanged.' }),
    ),
  },
  { additionalProperties: false },
);

export const SearchPage = t.Object({
  data: t.Array(Contact, { description: 'Contacts as GET /v1/contacts/{emailMd5} gives them, by emailMd5 ascending.' }),
  next: t.Union([t.String(), t.Null()], {
    description: 'Send it back as `cursor`, with the same filter, for the next page; null after the last.',
  }),
});

export const CountBody = t.Object(
  { filter: t.Optional(FilterField('Only contacts that pass it; every contact of the account without it.')) },
  { additionalProperties: false },
);

export const ContactCount = t.Object({ count: t.Integer({ minimum: 0, description: 'Exact.' }) });

export const ContactStats = t.Object({
  total: t.Integer({ minimum: 0 }),
  enabled: t.Integer({ minimum: 0 }),
  disabled: t.Integer({ minimum: 0 }),
  brands: t.Array(
    t.Object({
      brandId: t.String({ format: 'uuid' }),
      count: t.Integer({ minimum: 0, description: 'Contacts that carry the brand, enabled or not.' }),
    }),
    { description: 'Every brand of the account (not deleted ones), by name, each with its contacts (0 included).' },
  ),
});

/**
 * pageSize as sent: a JSON integer in bounds. Elysia would take the string "10" for 10 (its
 * normaliser converts numeric strings); the body is JSON, so a string is the wrong type.
 */
export function assertPageSize(body: unknown): void {
  const size = (body as { pageSize?: unknown } | undefined)?.pageSize;
  if (size === undefined) return;
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE)
    throw invalidField('/pageSize', `pageSize must be an integer from 1 to ${MAX_PAGE_SIZE}.`);
}

/** Top-level fields of each body (src/http/body-shape.ts: an unknown field is a 400, not dropped). */
export const BODY_FIELDS = {
  search: { allowed: Object.keys(SearchBody.properties), objects: [] },
  count: { allowed: Object.keys(CountBody.properties), objects: [] },
} as const;

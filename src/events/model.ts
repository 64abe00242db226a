import { t } from 'elysia';
import { queryInteger } from '../http/pagination';

export const EventSource = t.Union([
  t.Object({ type: t.Literal('api') }),
  t.Object({ type: t.Literal('import'), importId: t.String({ format: 'uuid' }) }),
]);

export const Event = t.Object(
  {
    id: t.String({ description: 'Unique, and the same every time the event is read or delivered: dedupe on it.' }),
    type: t.Literal('contact.brand_subscribed'),
    occurredAt: t.String({ format: 'date-time', description: 'When the brand was assigned.' }),
    data: t.Object({
      email: t.String(),
      emailMd5: t.String({ pattern: '^[a-f0-9]{32}$' }),
      brandId: t.String({ format: 'uuid' }),
      source: EventSource,
    }),
  },
  { description: 'A brand newly assigned to a contact, with brand-subscribe events published.' },
);

export const EventPage = t.Object({
  data: t.Array(Event),
  next: t.String({
    description:
      'Pass it as `after` to continue right after the last event of this page. An empty page gives a `next` ' +
      'that still continues from the same place: poll with it.',
  }),
});

export const EventsQuery = t.Object(
  {
    after: t.Optional(
      t.String({
        description:
          'A `next` from an earlier page, unchanged. Without it the feed starts at the oldest event kept ' +
          '(EVENT_RETENTION_DAYS). A cursor whose events were removed by the retention gets 410.',
      }),
    ),
    limit: queryInteger(
      'limit',
      1,
      1000,
      'limit must be an integer from 1 to 1000, in decimal digits.',
      'Events per page, 1 to 1000. Default 100.',
    ),
  },
  { additionalProperties: true },
);

import { t } from 'elysia';
import { listOf, pageParams } from '../http/pagination';

export const MAX_URL_LENGTH = 2048;
export const MAX_DESCRIPTION_LENGTH = 500;
/** Endpoints an account may have at once; one more is a 409 conflict_error. */
export const MAX_ENDPOINTS_PER_ACCOUNT = 20;

export const CREATE_FIELDS = ['url', 'description'] as const;

export const CreateEndpointBody = t.Object({
  url: t.String({
    maxLength: MAX_URL_LENGTH,
    description:
      `An absolute http or https URL of at most ${MAX_URL_LENGTH} characters, without credentials, whose host ` +
      'resolves. Unless WEBHOOK_ALLOW_PRIVATE_URLS is set, the host must not be or resolve to a loopback, ' +
      'private, link-local, CGNAT, multicast or other address that is not publicly reachable. Stored as ' +
      'normalised (WHATWG URL): the URL the events are sent to.',
    error: `url must be a string of at most ${MAX_URL_LENGTH} characters.`,
  }),
  description: t.Optional(
    t.String({
      maxLength: MAX_DESCRIPTION_LENGTH,
      description: `Free text for people, at most ${MAX_DESCRIPTION_LENGTH} characters.`,
      error: `description must be a string of at most ${MAX_DESCRIPTION_LENGTH} characters.`,
    }),
  ),
});
export type CreateEndpointInput = typeof CreateEndpointBody.static;

const endpointFields = {
  id: t.String({ format: 'uuid' }),
  url: t.String(),
  description: t.Optional(t.String({ description: 'Omitted when none was given.' })),
  enabled: t.Boolean({
    description: 'false once the endpoint was disabled after failing every attempt for 3 days.',
  }),
  disabledReason: t.Optional(t.String({ description: 'Why the endpoint was disabled; present only then.' })),
  createdAt: t.String({ format: 'date-time' }),
};

export const WebhookEndpointSummary = t.Object(endpointFields);

export const CreatedEndpoint = t.Object({
  id: endpointFields.id,
  url: endpointFields.url,
  description: endpointFields.description,
  enabled: t.Literal(true),
  secret: t.String({
    description:
      'The signing secret, `whsec_` then base64 of 32 random bytes (Standard Webhooks). Shown only in this ' +
      'response: keep it, it cannot be read again.',
  }),
  createdAt: endpointFields.createdAt,
});

export const Delivery = t.Object({
  pendingEvents: t.Integer({
    minimum: 0,
    description: 'Events of the feed after the last one delivered to this endpoint (an in-flight batch included).',
  }),
  lastSuccessAt: t.Optional(t.String({ format: 'date-time', description: 'The last batch answered with a 2xx.' })),
  lastFailureAt: t.Optional(t.String({ format: 'date-time', description: 'The last attempt that failed.' })),
  lastFailureReason: t.Optional(t.String({ description: 'Why the last failed attempt failed.' })),
  failingSince: t.Optional(
    t.String({
      format: 'date-time',
      description: 'Since when every attempt failed; present while failing. Three days of it disable the endpoint.',
    }),
  ),
  nextAttemptAt: t.Optional(
    t.String({
      format: 'date-time',
      description: 'When the batch in flight is sent again; present only while one awaits a retry.',
    }),
  ),
});

export const WebhookEndpoint = t.Object({ ...endpointFields, delivery: Delivery });

export const WebhookEndpointPage = listOf(WebhookEndpointSummary);

export const EndpointListQuery = t.Object(pageParams, { additionalProperties: true });

export const EndpointIdParams = t.Object({
  id: t.String({ format: 'uuid', error: 'id must be a UUID.' }),
});

import { Elysia, t } from 'elysia';
import type { Deps } from '../deps';
import { authOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { assertBodyShape } from '../http/body-shape';
import { rejectRepeatedParams, rejectUnknownParams } from '../http/pagination';
import {
  CREATE_FIELDS,
  CreatedEndpoint,
  CreateEndpointBody,
  EndpointIdParams,
  EndpointListQuery,
  MAX_ENDPOINTS_PER_ACCOUNT,
  WebhookEndpoint,
  WebhookEndpointPage,
} from './model';
import { createEndpoint, deleteEndpoint, getEndpoint, listEndpoints } from './service';

const EXTENSION = 'An extension beyond the contract. ';

export function webhookEndpointRoutes({ sql, config }: Deps) {
  return new Elysia({ prefix: '/v1/webhook-endpoints', detail: { tags: ['Webhook endpoints'] } })
    .get(
      '',
      ({ request, query }) => {
        rejectRepeatedParams(request.url);
        rejectUnknownParams(query, ['page', 'pageSize']);
        return listEndpoints(sql, authOf(request).accountId, query);
      },
      {
        query: EndpointListQuery,
        response: { 200: WebhookEndpointPage, ...errorResponses(400) },
        detail: {
          summary: 'List webhook endpoints, newest first',
          description: EXTENSION + 'Needs the scope `webhooks:read`. Secrets are never listed.',
        },
      },
    )
    .post(
      '',
      async ({ request, body, set }) => {
        const created = await createEndpoint(sql, authOf(request).accountId, body, config.webhookAllowPrivateUrls);
        set.status = 201;
        return created;
      },
      {
        body: CreateEndpointBody,
        // Elysia's normaliser drops unknown fields silently; a typo must be a 400 instead.
        transform: ({ body }) => assertBodyShape(body, { allowed: CREATE_FIELDS, objects: [] }),
        response: { 201: CreatedEndpoint, ...errorResponses(400, 409) },
        detail: {
          summary: 'Create a webhook endpoint',
          description:
            EXTENSION +
            'Needs the scope `webhooks:write`. The endpoint receives, as signed POSTs (Standard Webhooks), every ' +
            "event of the account's feed that becomes visible after it was created, in feed order. The " +
            'response holds the signing secret, the only time it is shown. 400 `invalid_request_error` with ' +
            'pointer `/url` for a URL that is not an absolute http(s) URL, carries credentials, does not ' +
            'resolve, or is or resolves to a loopback, private, link-local or otherwise non-public address ' +
            '(allowed when the service runs with WEBHOOK_ALLOW_PRIVATE_URLS=true, as the embedded default ' +
            'does); for a host, the detail says only that the URL is not allowed, never which of these it is. ' +
            `An account has at most ${MAX_ENDPOINTS_PER_ACCOUNT} endpoints: one more is 409 ` +
            '`conflict_error`.',
        },
      },
    )
    .get('/:id', ({ request, params }) => getEndpoint(sql, authOf(request).accountId, params.id), {
      params: EndpointIdParams,
      response: { 200: WebhookEndpoint, ...errorResponses(400, 404) },
      detail: {
        summary: 'Get a webhook endpoint and its delivery state',
        description:
          EXTENSION +
          'Needs the scope `webhooks:read`. No secret. `delivery` tells how many events wait for the ' +
          'endpoint, its last success, its last failure with the reason, and when a batch awaiting a 2xx ' +
          "is sent again. 404 `not_found_error` for an id that is not one of the account's endpoints.",
      },
    })
    .delete(
      '/:id',
      async ({ request, params, set }) => {
        await deleteEndpoint(sql, authOf(request).accountId, params.id);
        set.status = 204;
      },
      {
        params: EndpointIdParams,
        response: { 204: t.Void({ description: 'Deleted; no body.' }), ...errorResponses(400, 404) },
        detail: {
          summary: 'Delete a webhook endpoint',
          description:
            EXTENSION +
            'Needs the scope `webhooks:write`. No batch starts for the endpoint after this (one already on ' +
            "its way may still arrive). 404 `not_found_error` for an id that is not one of the account's endpoints.",
        },
      },
    );
}

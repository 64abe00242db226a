import { Elysia, t } from 'elysia';
import type { Deps } from '../deps';
import { authOf, claimConfirmed, claimOf, confirmedAuthOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { assertBodyShape } from '../http/body-shape';
import { jsonResponse } from '../http/json-response';
import { resentAfterMs } from '../http/lost-session';
import { addContactBrands, listContactBrands, removeContactBrand } from './brands';
import {
  AddBrandsBody,
  BODY_FIELDS,
  Contact,
  ContactBrandParams,
  ContactBrands,
  CreateContactBody,
  DisableContactBody,
  EmailMd5Params,
  PatchContactBody,
  publishesEvents,
} from './model';
import { refuseUncopyableKeys } from './attributes';
import { createContact, disableContact, getContact, patchContact } from './service';
import type { ContactFastPath } from './fast-path';
import { contactErasureRoutes } from './erase-routes';

const ONE_CONTACT = /^\/v1\/contacts\/[^/]+$/;

/**
 * The routes whose handlers try the one-statement path first (fast-path.ts), and so may start on a
 * cached key claim: app.ts authenticates every other /v1 request against the database up front.
 */
export function takesKeyClaims(method: string, path: string): boolean {
  if (method === 'POST') return path === '/v1/contacts';
  return (method === 'GET' || method === 'PATCH') && ONE_CONTACT.test(path);
}

/**
 * After a write that may have recorded brand-subscribe events (brands sent, events not turned off),
 * once it committed: wakes the event sequencer (src/events/wake.ts). A write that recorded none (the
 * brands were there already) only costs a spare look.
 */
function hintEvents(
  { eventsHint }: Deps,
  body: { brandIds?: readonly string[]; publishBrandSubscribeEvents?: boolean },
) {
  if (eventsHint && body.brandIds?.length && publishesEvents(body)) eventsHint.committed();
}

/**
 * Brand assignment under `/brands` and, identically, under the deprecated `/subscriptions`.
 * Registered twice from one definition so the two paths cannot drift apart.
 */
function brandAssignmentRoutes(deps: Deps, segment: 'brands' | 'subscriptions') {
  const { sql } = deps;
  const deprecated = segment === 'subscriptions';
  const note = deprecated ? ' (deprecated alternate of /brands)' : '';
  return new Elysia({ prefix: '/v1/contacts', detail: { tags: ['Contacts'] } })
    .get(
      `/:emailMd5/${segment}`,
      ({ request, params }) => listContactBrands(sql, authOf(request).accountId, params.emailMd5),
      {
        params: EmailMd5Params,
        response: { 200: ContactBrands, ...errorResponses(400, 404) },
        detail: { summary: `List the contact's brands${note}`, deprecated },
      },
    )
    .post(
      `/:emailMd5/${segment}`,
      async ({ request, params, body }) => {
        const brands = await addContactBrands(
          sql,
          authOf(request).accountId,
          params.emailMd5,
          body.brandIds,
          publishesEvents(body),
        );
        hintEvents(deps, body);
        return brands;
      },
      {
        transform: ({ body }) => assertBodyShape(body, BODY_FIELDS.addBrands),
        params: EmailMd5Params,
        body: AddBrandsBody,
        response: { 200: ContactBrands, ...errorResponses(400, 404, 409) },
        detail: { summary: `Add brands to the contact${note}`, deprecated },
      },
    )
    .delete(
      `/:emailMd5/${segment}/:brandId`,
      async ({ request, params, set }) => {
        await removeContactBrand(sql, authOf(request).accountId, params.emailMd5, params.brandId);
        set.status = 204;
      },
      {
        params: ContactBrandParams,
        response: { 204: t.Void({ description: 'Removed; no body.' }), ...errorResponses(400, 404, 409) },
        detail: { summary: `Remove a brand from the contact${note}`, deprecated },
      },
    );
}

/** `fast` is tried first when configured (CONTACT_FAST_PATH); the plain path decides everything else. */
function contactResourceRoutes(deps: Deps, fast: ContactFastPath | undefined) {
  const { sql } = deps;
  return new Elysia({ prefix: '/v1/contacts', detail: { tags: ['Contacts'] } })
    .post(
      '',
      async ({ request, body }) => {
        const added = await fast?.create(claimOf(request), body);
        if (added) {
          claimConfirmed(request);
          hintEvents(deps, body);
          return jsonResponse(added, 201);
        }
        const { created, contact } = await createContact(sql, (await confirmedAuthOf(request)).accountId, body, {
          resentAfterMs: resentAfterMs(request),
        });
        hintEvents(deps, body);
        return jsonResponse(contact, created ? 201 : 200);
      },
      {
        transform: ({ body }) => {
          assertBodyShape(body, BODY_FIELDS.create);
          // Before Elysia's normaliser copies the body, which loses a `__proto__` key.
          refuseUncopyableKeys((body as { attributes?: unknown }).attributes);
        },
        body: CreateContactBody,
        response: { 200: Contact, 201: Contact, ...errorResponses(400, 409) },
        detail: {
          summary: 'Create a contact, or merge into an existing one',
          description: '201 when created; 200 when merged or skipped.',
        },
      },
    )
    .get(
      '/:emailMd5',
      async ({ request, params }) => {
        const found = await fast?.get(claimOf(request), params.emailMd5);
        if (found) {
          claimConfirmed(request);
          return jsonResponse(found);
        }
        return jsonResponse(await getContact(sql, (await confirmedAuthOf(request)).accountId, params.emailMd5));
      },
      {
        params: EmailMd5Params,
        response: { 200: Contact, ...errorResponses(400, 404) },
        detail: { summary: 'Get a contact' },
      },
    )
    .patch(
      '/:emailMd5',
      async ({ request, params, body }) => {
        const patched = await fast?.patch(claimOf(request), params.emailMd5, body.attributes);
        if (patched) {
          claimConfirmed(request);
          return jsonResponse(patched);
        }
        const accountId = (await confirmedAuthOf(request)).accountId;
        return jsonResponse(await patchContact(sql, accountId, params.emailMd5, body.attributes));
      },
      {
        transform: ({ body }) => {
          assertBodyShape(body, BODY_FIELDS.patch);
          // Before Elysia's normaliser copies the body, which loses a `__proto__` key.
          refuseUncopyableKeys((body as { attributes?: unknown }).attributes);
        },
        params: EmailMd5Params,
        body: PatchContactBody,
        response: { 200: Contact, ...errorResponses(400, 404, 409) },
        detail: { summary: 'Update attributes (RFC 7386 merge patch)' },
      },
    )
    .post(
      '/:emailMd5/disable',
      ({ request, params }) => disableContact(sql, authOf(request).accountId, params.emailMd5),
      {
        transform: ({ body }) => assertBodyShape(body, BODY_FIELDS.disable, true),
        params: EmailMd5Params,
        body: DisableContactBody,
        response: { 200: Contact, ...errorResponses(400, 404, 409) },
        detail: {
          summary: 'Disable a contact',
          description: 'No body (an empty JSON object is accepted). Idempotent.',
        },
      },
    );
}

export function contactRoutes(deps: Deps, fast: ContactFastPath | undefined) {
  return new Elysia()
    .use(contactResourceRoutes(deps, fast))
    .use(contactErasureRoutes(deps))
    .use(brandAssignmentRoutes(deps, 'brands'))
    .use(brandAssignmentRoutes(deps, 'subscriptions'));
}

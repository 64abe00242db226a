import { Elysia } from 'elysia';
import type { Deps } from './deps';
import { Authenticator } from './auth/authenticate';
import { InvalidationListener, type Invalidation } from './auth/cache';
import { requiredScope } from './auth/scopes';
import { ApiError, rateLimited } from './errors';
import type { HeaderFields } from './ratelimit/limiter';
import { failureLogFields, fromFramework } from './http/framework-errors';
import { problemResponse } from './http/problem';
import { unavailableError } from './http/unavailable';
import { readJsonBody } from './http/json-body';
import { noteFailure } from './http/lost-session';
import './http/formats';
import { confirmedAuthOf, factsOf, isUnconfirmed, startRequest } from './http/context';
import { pathOf } from './http/app-request';
import { errorFields, log } from './log';
import { docsRoutes } from './http/docs';
import { healthRoutes } from './http/health';
import { schemaRoutes } from './schema';
import { brandRoutes } from './brands';
import { suppressionListRoutes } from './suppressions';
import { suppressionCheckRoutes } from './suppressions/check-routes';
import { contactRoutes, takesKeyClaims } from './contacts';
import { ContactFastPath } from './contacts/fast-path';
import { AccountNodes } from './db';
import { importRoutes } from './imports';
import { eventRoutes } from './events';
import { webhookEndpointRoutes } from './webhooks';
import { contactExportRoutes } from './exports';
import { EXPORT_FILTER_SCHEMA } from './exports/model';
import { contactSearchRoutes } from './search';
import { CONTACT_FILTER_SCHEMA } from './search/filter-schema';

/** Builds the whole HTTP app from the feature modules. Tests call `app.handle(new Request(…))`. */
export function buildApp(deps: Deps) {
  const { config, sql, limiter } = deps;
  const authenticator = new Authenticator(sql);
  // Without the fast path no request starts on a cached key claim: each is authenticated up front.
  const fastPath = config.contactFastPath
    ? new ContactFastPath(sql, authenticator.keys, new AccountNodes(sql, deps.nodePool, deps.stop))
    : undefined;
  const caches = fastPath ? [authenticator.keys, fastPath.schemas] : [authenticator.keys];
  const listener = new InvalidationListener(
    sql,
    (change: Invalidation | undefined) => {
      if (change?.table === 'api_keys' && change.keyId) authenticator.keys.delete(change.keyId);
      else if (change?.table === 'accounts' && change.accountId) authenticator.keys.deleteGroup(change.accountId);
      else if (change?.table === 'schema_attributes' && change.accountId) fastPath?.schemas.delete(change.accountId);
      // A truncate, or a payload this version does not know: drop everything.
      else for (const cache of caches) cache.clear();
    },
    () => {
      for (const cache of caches) {
        cache.clear();
        cache.live = true;
      }
    },
    deps.stop,
  );

  function errorResponse(error: unknown, request: Request, instance: string, code?: unknown): Response {
    deps.circuit?.failed(error);
    noteFailure(request, error);
    const mapped = fromFramework(code, error) ?? unavailableError(error);
    if (mapped) return problemResponse(mapped, config.docsUrl, instance);
    const fields = failureLogFields(code, error) ?? errorFields(error);
    log('error', 'unexpected error', { requestId: factsOf(request)?.id, route: factsOf(request)?.route, ...fields });
    const hidden = new ApiError('api_error', 'An unexpected error occurred. Quote the request id when reporting it.');
    return problemResponse(hidden, config.docsUrl, instance);
  }

  return new Elysia()
    .onRequest(async ({ request }) => {
      deps.load?.hit();
      const facts = startRequest(request);
      const path = pathOf(request.url);
      if (path === '/v1' || path.startsWith('/v1/')) {
        // Every /v1 request needs the database (its key at least); while it is known away, refuse at once.
        const admitted = deps.circuit?.admit();
        if (admitted) await admitted;
        listener.ensureStarted();
        const header = request.headers.get('authorization');
        const scope = requiredScope(request.method, path);
        const claim =
          scope && fastPath && takesKeyClaims(request.method, path) ? authenticator.claim(header, scope) : undefined;
        if (claim) {
          facts.claim = claim;
          facts.confirm = () => authenticator.authenticate(header, scope);
        } else {
          facts.claim = await authenticator.authenticate(header, scope);
          facts.auth = facts.claim.auth;
        }
        // The account is known (401 and 403 above cost it nothing): its limit, before any work.
        if (limiter) {
          const accountId = facts.claim.auth.accountId;
          const headers: HeaderFields = {};
          facts.headers = headers;
          const verdict = limiter.admit(accountId, facts.claim.rateLimit, headers);
          const wait = typeof verdict === 'number' ? verdict : await verdict;
          if (wait > 0) throw rateLimited(wait);
          // A cached claim refused later (a key revoked a moment ago) gives its token back: a 401 counts nothing.
          if (claim && wait === 0)
            facts.refund = () => {
              limiter.refund(accountId);
              facts.headers = undefined;
            };
        }
      }
    })
    .onParse(async ({ request }) =>
      readJsonBody(request, config.bodyLimitBytes, (bytes) => {
        const facts = factsOf(request);
        if (facts) facts.body = bytes;
      }),
    )
    .onBeforeHandle(({ request, route }) => {
      const facts = factsOf(request);
      if (facts) facts.route = route;
    })
    .onAfterResponse(({ request }) => {
      // The request's time, for the busy signal's requests in flight (src/imports/api-load.ts).
      const facts = factsOf(request);
      if (facts) deps.load?.served(performance.now() - facts.started);
    })
    .onError(async ({ code, error, request }) => {
      const instance = pathOf(request.url);
      // A request that went ahead on a cached key claim answers nothing but success before the key is
      // confirmed: a revoked key with a malformed body is still 401, not 400.
      // Not for a 429, which does nothing either way: a refused request stays as cheap as it can be.
      if (isUnconfirmed(request) && !(error instanceof ApiError && error.code === 'rate_limit_error')) {
        const refusal = await confirmedAuthOf(request).then(
          () => undefined,
          (e: unknown) => e,
        );
        if (refusal !== undefined) return errorResponse(refusal, request, instance);
      }
      return errorResponse(error, request, instance, code);
    })
    .use(docsRoutes(config.publicUrl, { ContactFilter: CONTACT_FILTER_SCHEMA, ExportFilter: EXPORT_FILTER_SCHEMA }))
    .use(healthRoutes(deps))
    .use(schemaRoutes(deps))
    .use(brandRoutes(deps))
    .use(suppressionListRoutes(deps))
    .use(suppressionCheckRoutes(deps))
    .use(contactRoutes(deps, fastPath))
    .use(importRoutes(deps))
    .use(eventRoutes(deps))
    .use(webhookEndpointRoutes(deps))
    .use(contactExportRoutes(deps))
    .use(contactSearchRoutes(deps));
}

export type App = ReturnType<typeof buildApp>;

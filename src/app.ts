import { Elysia } from 'elysia';
import { swagger } from '@elysiajs/swagger';
import type { Deps } from './deps';
import { authenticate } from './auth/authenticate';
import { requiredScope } from './auth/scopes';
import { ApiError } from './errors';
import { failureLogFields, fromFramework } from './http/framework-errors';
import { problemResponse } from './http/problem';
import { readJsonBody } from './http/json-body';
import './http/formats';
import { factsOf, startRequest } from './http/context';
import { errorFields, log } from './http/log';
import { healthRoutes } from './http/health';
import { schemaRoutes } from './schema';
import { brandRoutes } from './brands';
import { suppressionListRoutes } from './suppressions';
import { contactRoutes } from './contacts';
import { importRoutes } from './imports';

/** Builds the whole HTTP app from the feature modules. Tests call `app.handle(new Request(…))`. */
export function buildApp(deps: Deps) {
  const { config, sql } = deps;
  return new Elysia()
    .use(
      swagger({
        path: '/docs',
        documentation: {
          info: {
            title: 'Contact, Brand and Suppression Management API',
            version: '1.0.0',
            description: 'Account-scoped contacts, brands, suppression lists and bulk contact imports. Errors are RFC 9457 problem details.',
          },
          components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'ck_<id>_<secret> keys issued by the admin CLI' } } },
          security: [{ bearer: [] }],
        },
        exclude: ['/docs', '/docs/json'],
      }),
    )
    .onRequest(async ({ request }) => {
      const facts = startRequest(request);
      const path = new URL(request.url).pathname;
      if (path === '/v1' || path.startsWith('/v1/')) {
        facts.auth = await authenticate(sql, request.headers.get('authorization'), requiredScope(request.method, path));
      }
    })
    .onParse(async ({ request }) => readJsonBody(request, config.bodyLimitBytes))
    .onBeforeHandle(({ request, route }) => {
      const facts = factsOf(request);
      if (facts) facts.route = route;
    })
    .onError(({ code, error, request }) => {
      const instance = new URL(request.url).pathname;
      const mapped = fromFramework(code, error);
      if (mapped) return problemResponse(mapped, config.docsUrl, instance);
      const fields = failureLogFields(code, error) ?? errorFields(error);
      log('error', 'unexpected error', { requestId: factsOf(request)?.id, route: factsOf(request)?.route, ...fields });
      const hidden = new ApiError('api_error', 'An unexpected error occurred. Quote the request id when reporting it.');
      return problemResponse(hidden, config.docsUrl, instance);
    })
    .use(healthRoutes(deps))
    .use(schemaRoutes(deps))
    .use(brandRoutes(deps))
    .use(suppressionListRoutes(deps))
    .use(contactRoutes(deps))
    .use(importRoutes(deps));
}

export type App = ReturnType<typeof buildApp>;

import type { Server } from 'bun';
import { buildApp } from '../app';
import type { Deps } from '../deps';
import { ApiError } from '../errors';
import { uploadHandler } from '../uploads';
import { factsOf, requestIdOf } from './context';
import type { HeaderFields } from '../ratelimit/limiter';
import { fromFramework } from './framework-errors';
import { errorFields, log, logRequest } from '../log';
import { problemResponse } from './problem';
import { appRequestOf, pathOf } from './app-request';
import { againAfterLostSession } from './lost-session';
import { apiMetrics, type ApiMetrics } from '../metrics/api';
import { exposition } from '../metrics/registry';

/** Where to listen; the configured PORT and HOST unless given (tests listen on port 0). */
export interface Listen {
  port: number;
  hostname: string;
}

const UPLOADS = '/uploads/';
/**
 * Prometheus's scrape target, outside /v1 and without a key like /healthz: it holds counts by route
 * template, status and state, never an id, key or email. Served here, before the app, so it is no
 * operation of the OpenAPI document. Keep it off the public edge if its figures are not for clients.
 */
const METRICS = '/metrics';

/**
 * The API's HTTP server: src/index.ts runs it, and the edge tests start it exactly so. Whatever the
 * runtime lets through reaches the app as a request on a fixed origin, and every failure the app
 * does not answer itself becomes a problem+json 500 (never Bun's HTML error page).
 */
export function serveApi(
  deps: Deps,
  listen: Listen = { port: deps.config.port, hostname: deps.config.host },
  metrics: ApiMetrics = apiMetrics(deps),
): Server<undefined> {
  const app = buildApp(deps);
  // The local store's upload link, `/uploads/<token>`.
  const uploads = uploadHandler(deps);
  const docsUrl = deps.config.docsUrl;

  function hidden(error: unknown, requestId: string, instance?: string): Response {
    log('error', 'unexpected error', { requestId, ...errorFields(error) });
    return problemResponse(
      new ApiError('api_error', 'An unexpected error occurred. Quote the request id when reporting it.'),
      docsUrl,
      instance,
    );
  }

  /** The response, and the route when it is not the app's (which records its own in the request's facts). */
  async function answer(
    request: Request,
  ): Promise<{ response: Response; appRequest?: Request; path: string; route?: string }> {
    const appRequest = appRequestOf(request);
    if (!appRequest)
      return {
        response: problemResponse(fromFramework('NOT_FOUND', undefined)!, docsUrl, pathOf(request.url)),
        path: 'unmatched',
      };
    const path = pathOf(appRequest.url);
    if (path === METRICS && (request.method === 'GET' || request.method === 'HEAD'))
      return { response: await exposition(metrics.registry), path, route: METRICS };
    if (path.startsWith(UPLOADS))
      return { response: await uploads(appRequest), appRequest, path, route: '/uploads/:token' };
    const first = await app.handle(appRequest);
    if (first.status !== 503) return { response: first, appRequest, path };
    const sent = await againAfterLostSession(appRequest, first, (r) => app.handle(r), deps.circuit);
    return { response: sent.response, appRequest: sent.request, path };
  }

  /** The answer to one request, logged and counted; throws only if logging or counting does. */
  async function respond(request: Request): Promise<Response> {
    const started = performance.now();
    // The app's own id for the request when it saw it (one id, made once), else the server's.
    let requestId: string | undefined;
    let response: Response;
    let route = 'unmatched';
    let path = '';
    let headers: HeaderFields | undefined;
    try {
      const answered = await answer(request);
      response = answered.response;
      path = answered.path;
      const facts = answered.appRequest && factsOf(answered.appRequest);
      if (facts) {
        requestId = facts.id;
        headers = facts.headers;
      }
      route = facts?.route ?? answered.route ?? 'unmatched';
    } catch (error) {
      requestId = requestIdOf(request);
      response = hidden(error, requestId, pathOf(request.url));
    }
    requestId ??= requestIdOf(request);
    response.headers.set('x-request-id', requestId);
    if (headers) for (const name in headers) response.headers.set(name, headers[name]!);
    const ms = performance.now() - started;
    // The same route and status as the log line: a template, never the raw path.
    metrics.http.observe(request.method, route, response.status, ms / 1000);
    if (path !== '/healthz' && path !== '/readyz' && route !== METRICS) {
      logRequest({
        requestId,
        method: request.method,
        route,
        status: response.status,
        durationMs: Math.round(ms * 100) / 100,
      });
    }
    return response;
  }

  return Bun.serve({
    port: listen.port,
    hostname: listen.hostname,
    // One of a group of API processes on one port (src/cli/api-processes.ts): the kernel spreads
    // the connections over them (SO_REUSEPORT); an API alone still refuses a port already taken.
    reusePort: deps.config.apiProcessIndex !== undefined,
    // Bun's own body limit is lifted so the upload handler answers oversize files with S3's XML
    // EntityTooLarge; uploads are bounded there (5 GB) and JSON bodies in readJsonBody.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    idleTimeout: 0,
    // Every 500 names its request's path in `instance`, as every other problem does.
    async fetch(request) {
      try {
        return await respond(request);
      } catch (error) {
        return hidden(error, requestIdOf(request), pathOf(request.url));
      }
    },
    // Reached only if fetch itself fails to produce a response, which its catch leaves no way to;
    // Bun gives no request here, so there is no path for `instance`.
    error(error) {
      return hidden(error, crypto.randomUUID());
    },
  });
}

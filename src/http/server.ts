import type { Server } from 'bun';
import { buildApp } from '../app';
import type { Deps } from '../deps';
import { ApiError } from '../errors';
import { uploadHandler } from '../uploads';
import { factsOf } from './context';
import { fromFramework } from './framework-errors';
import { errorFields, log, logRequest } from '../log';
import { problemResponse } from './problem';
import { appRequestOf } from './app-request';

/** Where to listen; the configured PORT and HOST unless given (tests listen on port 0). */
export interface Listen {
  port: number;
  hostname: string;
}

const UPLOADS = '/uploads/';

/**
 * The API's HTTP server: src/index.ts runs it, and the edge tests start it exactly so. Whatever the
 * runtime lets through reaches the app as a request on a fixed origin, and every failure the app
 * does not answer itself becomes a problem+json 500 (never Bun's HTML error page).
 */
export function serveApi(
  deps: Deps,
  listen: Listen = { port: deps.config.port, hostname: deps.config.host },
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

  async function answer(request: Request): Promise<{ response: Response; appRequest?: Request; path: string }> {
    const appRequest = appRequestOf(request);
    if (!appRequest)
      return { response: problemResponse(fromFramework('NOT_FOUND', undefined)!, docsUrl), path: 'unmatched' };
    const path = new URL(appRequest.url).pathname;
    const response = path.startsWith(UPLOADS) ? await uploads(appRequest) : await app.handle(appRequest);
    return { response, appRequest, path };
  }

  return Bun.serve({
    port: listen.port,
    hostname: listen.hostname,
    // Bun's own body limit is lifted so the upload handler answers oversize files with S3's XML
    // EntityTooLarge; uploads are bounded there (5 GB) and JSON bodies in readJsonBody.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    idleTimeout: 0,
    async fetch(request) {
      const started = performance.now();
      let requestId = request.headers.get('x-request-id')?.slice(0, 128) || crypto.randomUUID();
      let response: Response;
      let route = 'unmatched';
      let path = '';
      try {
        const answered = await answer(request);
        response = answered.response;
        path = answered.path;
        const facts = answered.appRequest && factsOf(answered.appRequest);
        if (facts) requestId = facts.id;
        route = facts?.route ?? (path.startsWith(UPLOADS) ? '/uploads/:token' : 'unmatched');
      } catch (error) {
        response = hidden(error, requestId);
      }
      response.headers.set('x-request-id', requestId);
      if (path !== '/healthz' && path !== '/readyz') {
        logRequest({
          requestId,
          method: request.method,
          route,
          status: response.status,
          durationMs: Math.round((performance.now() - started) * 100) / 100,
        });
      }
      return response;
    },
    // Reached only when fetch itself fails to produce a response.
    error(error) {
      return hidden(error, crypto.randomUUID());
    },
  });
}

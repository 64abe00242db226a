import { invalidParameter } from '../errors';

/**
 * The /v1 routes that take query parameters: the list endpoints, whose handlers check their own
 * (rejectRepeatedParams, rejectUnknownParams). test/http/http-edges.test.ts checks this set against the
 * routes that declare a query schema, so the two cannot drift apart.
 */
export const ROUTES_WITH_QUERY: ReadonlySet<string> = new Set([
  'GET /v1/brands',
  'GET /v1/suppression-lists',
  'GET /v1/suppression-lists/:suppressionListId/imports',
  'GET /v1/contact-imports',
  'GET /v1/events',
  'GET /v1/webhook-endpoints',
  'GET /v1/contact-exports',
]);

/**
 * Every other /v1 route takes no query parameter, so any one is unknown: ignoring it would let a
 * client believe it filtered or changed something (`GET /v1/contacts/<md5>?fields=email`).
 */
export function rejectQueryOnPlainRoute(method: string, route: string | undefined, url: string): void {
  // Elysia answers HEAD with the GET route.
  const asRouted = method === 'HEAD' ? 'GET' : method;
  if (route === undefined || ROUTES_WITH_QUERY.has(`${asRouted} ${route}`)) return;
  const q = url.indexOf('?');
  if (q < 0) return;
  for (const key of new URLSearchParams(url.slice(q + 1)).keys()) {
    throw invalidParameter(key, `Unknown query parameter ${key}. This route takes no query parameters.`);
  }
}

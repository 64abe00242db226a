/**
 * The origin of every request the app sees. Routing must not depend on the Host header: Bun builds
 * `request.url` from it (no Host gives a bare path, which `new URL` refuses), and Elysia finds the
 * path by skipping 11 characters of the URL, so a Host shorter than 4 characters (`x`, `x.y`) routed
 * every request to 404. Longer than 4 characters on purpose.
 */
export const APP_ORIGIN = 'http://localhost';

/** The request target (path and query) of a request as Bun hands it over: absolute URL or bare path. */
export function requestTarget(url: string): string {
  if (url.startsWith('/')) return url;
  const slash = url.indexOf('/', url.indexOf('://') + 3);
  if (slash < 0) return '/';
  // A Host with `?` or `#` ends up before the path; only what follows the authority is the target.
  return url.slice(slash);
}

/**
 * The request the app handles: the client's method, headers and body on `APP_ORIGIN` + its target.
 * The body is passed as a stream (`new Request(url, request)` would buffer a 5 GB upload), and is
 * dropped on GET and HEAD, which the Request constructor refuses a body on. Undefined when the
 * runtime's Request cannot carry the method as sent (it turns some methods it does not know into
 * GET): such a request must not be routed as something else.
 */
export function appRequestOf(request: Request): Request | undefined {
  const url = APP_ORIGIN + requestTarget(request.url);
  if (url === request.url) return request;
  const bodyless = request.method === 'GET' || request.method === 'HEAD';
  const rebuilt = new Request(url, {
    method: request.method,
    headers: request.headers,
    body: bodyless ? undefined : request.body,
    signal: request.signal,
    duplex: 'half',
  } as RequestInit);
  return rebuilt.method === request.method ? rebuilt : undefined;
}

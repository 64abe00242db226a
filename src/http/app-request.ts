/**
 * The origin of every request the app sees unless the client's own already routes the same. Routing
 * must not depend on the Host header: Bun builds `request.url` from it (no Host gives a bare path,
 * which `new URL` refuses), and Elysia finds the path by skipping 11 characters of the URL, so a Host
 * shorter than 4 characters (`x`, `x.y`) routed every request to 404. Longer than 4 characters on
 * purpose.
 */
export const APP_ORIGIN = 'http://localhost';

/** Elysia looks for the path's `/` from this index of the URL on. */
const ELYSIA_PATH_FROM = 11;
const SLASH = 47;

/** The request target (path and query) of a request as Bun hands it over: absolute URL or bare path. */
export function requestTarget(url: string): string {
  if (url.startsWith('/')) return url;
  const slash = url.indexOf('/', url.indexOf('://') + 3);
  if (slash < 0) return '/';
  // A Host with `?` or `#` ends up before the path; only what follows the authority is the target.
  return url.slice(slash);
}

/**
 * `new URL(url).pathname` of a URL the runtime serialised (Bun's `request.url`, or a Request built
 * in-process), without parsing it again: its path is already normalised, so it is the target up to
 * its query or fragment.
 */
export function pathOf(url: string): string {
  const target = requestTarget(url);
  const end = target.search(/[?#]/);
  return end < 0 ? target : target.slice(0, end);
}

/**
 * The request the app handles: the client's method, headers and body on `APP_ORIGIN` + its target.
 * The body is passed as a stream (`new Request(url, request)` would buffer a 5 GB upload), and is
 * dropped on GET and HEAD, which the Request constructor refuses a body on. Undefined when the
 * runtime's Request cannot carry the method as sent (it turns some methods it does not know into
 * GET): such a request must not be routed as something else.
 *
 * A request whose own origin already routes exactly as `APP_ORIGIN` would is handed over as it is:
 * the rebuild cost a contact request about 7 µs of the API's CPU under load (a new Request copies
 * the headers and wraps the body and signal), and clients send the same Host request after request.
 */
export function appRequestOf(request: Request): Request | undefined {
  const target = requestTarget(request.url);
  if (routesAsSent(request.url, target)) return request;
  const url = APP_ORIGIN + target;
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

// The last origin found to route as sent: one client's Host repeats, and any other is checked anew.
let plainOrigin = APP_ORIGIN;

/**
 * True when `url` is `<origin><target>` with an origin that leaves nothing to the Host: long enough
 * for Elysia to find the path where it starts, no `?` or `#` that would move the query (read from
 * the first `?`), and an origin `new URL` accepts (the list routes parse the URL's query with it).
 */
function routesAsSent(url: string, target: string): boolean {
  const length = url.length - target.length;
  // A URL without a path has the target `/` appended by requestTarget, not in the URL.
  if (length < ELYSIA_PATH_FROM || url.charCodeAt(length) !== SLASH) return false;
  const origin = url.slice(0, length);
  if (origin === plainOrigin) return true;
  if (origin.includes('?') || origin.includes('#') || !URL.canParse(origin)) return false;
  plainOrigin = origin;
  return true;
}

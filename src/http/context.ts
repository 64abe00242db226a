import type { Auth, KeyClaim } from '../auth/authenticate';
import type { HeaderFields } from '../ratelimit/limiter';
import { ApiError } from '../errors';
import { rejectQueryOnPlainRoute } from './query-rules';

/**
 * Per-request facts established before Elysia's router runs (authentication happens before the body
 * is parsed so that the order of checks is 401 → 403 → 400). Keyed by the Request object.
 */
interface RequestFacts {
  id: string;
  started: number;
  /** The key, confirmed against the database during this request. */
  auth?: Auth;
  /**
   * On the one-statement contact routes: the key at the version its statement must find unchanged.
   * Without `auth` it comes from the cache and is unconfirmed: the request may succeed on it only
   * through such a statement, and anything else it answers waits for `confirm` (app.ts onError, the
   * plain path of the handlers).
   */
  claim?: KeyClaim;
  confirm?: () => Promise<KeyClaim>;
  /** Gives back the rate limit token an unconfirmed claim took, should its key be refused (src/app.ts). */
  refund?: () => void;
  /**
   * Header fields the answer carries whatever answers it (the rate limit's), added by the server
   * (src/http/server.ts) with X-Request-Id. Not Elysia's `set.headers`: a route that returns a
   * Response (the contact routes' jsonResponse) is copied whole by Elysia whenever `set.headers` is
   * not empty, its body turned into a stream.
   */
  headers?: HeaderFields;
  route?: string;
  /** The query was checked against the route (once the key was; see `admitted`). */
  queryChecked?: boolean;
  /** The JSON body as read, so that the request can be sent again (src/http/lost-session.ts). */
  body?: Uint8Array;
  /** The request failed because its database session ended (src/http/lost-session.ts). */
  lostSession?: boolean;
}

const facts = new WeakMap<Request, RequestFacts>();

/** The client's X-Request-Id (its first 128 characters), or a new one. */
export function requestIdOf(request: Request): string {
  return request.headers.get('x-request-id')?.slice(0, 128) || crypto.randomUUID();
}

export function startRequest(request: Request): RequestFacts {
  const f: RequestFacts = { id: requestIdOf(request), started: performance.now() };
  facts.set(request, f);
  return f;
}

export function factsOf(request: Request): RequestFacts | undefined {
  return facts.get(request);
}

/** The authenticated account of a /v1 request; route handlers call this. */
export function authOf(request: Request): Auth {
  const f = facts.get(request);
  if (!f?.auth) throw new ApiError('api_error', 'The request was not authenticated.');
  admitted(request, f);
  return f.auth;
}

/** The key claim of a one-statement contact route, confirmed or not. */
export function claimOf(request: Request): KeyClaim {
  const f = facts.get(request);
  if (!f?.claim) throw new ApiError('api_error', 'The request was not authenticated.');
  admitted(request, f);
  return f.claim;
}

/**
 * The request-shape check that no route declares: a query on a /v1 route that takes none. Every
 * /v1 handler asks for its key (authOf, claimOf) before it does anything, and by then the key has
 * been checked (401, 403 first) and the path and body validated, so the 400 comes where DESIGN.md's
 * order of checks puts it. A refusal on an unconfirmed claim is answered as 401 if the key is bad
 * (app.ts onError confirms it first).
 */
function admitted(request: Request, f: RequestFacts): void {
  if (f.queryChecked) return;
  f.queryChecked = true;
  rejectQueryOnPlainRoute(request.method, f.route, request.url);
}

/** The key confirmed against the database (401/403 problems when it is not valid after all). */
export async function confirmedAuthOf(request: Request): Promise<Auth> {
  const f = facts.get(request);
  if (f?.auth) return f.auth;
  const confirm = f?.confirm;
  if (!f || !confirm) throw new ApiError('api_error', 'The request was not authenticated.');
  f.confirm = undefined;
  // A refused key leaves no claim behind: the request is answered with the refusal, once.
  f.claim = await confirm().catch((error: unknown) => {
    f.claim = undefined;
    f.refund?.();
    throw error;
  });
  f.auth = f.claim.auth;
  return f.auth;
}

/** A statement re-checked the claim and succeeded on it: the key counts as confirmed. */
export function claimConfirmed(request: Request): void {
  const f = facts.get(request);
  if (f?.claim && !f.auth) f.auth = f.claim.auth;
}

/** True while the request rests on an unconfirmed claim. */
export function isUnconfirmed(request: Request): boolean {
  const f = facts.get(request);
  return f?.claim !== undefined && f.auth === undefined;
}

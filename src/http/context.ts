import type { Auth, KeyClaim } from '../auth/authenticate';
import { ApiError } from '../errors';

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
  route?: string;
}

const facts = new WeakMap<Request, RequestFacts>();

export function startRequest(request: Request): RequestFacts {
  const id = request.headers.get('x-request-id')?.slice(0, 128) || crypto.randomUUID();
  const f: RequestFacts = { id, started: performance.now() };
  facts.set(request, f);
  return f;
}

export function factsOf(request: Request): RequestFacts | undefined {
  return facts.get(request);
}

/** The authenticated account of a /v1 request; route handlers call this. */
export function authOf(request: Request): Auth {
  const auth = facts.get(request)?.auth;
  if (!auth) throw new ApiError('api_error', 'The request was not authenticated.');
  return auth;
}

/** The key claim of a one-statement contact route, confirmed or not. */
export function claimOf(request: Request): KeyClaim {
  const claim = facts.get(request)?.claim;
  if (!claim) throw new ApiError('api_error', 'The request was not authenticated.');
  return claim;
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

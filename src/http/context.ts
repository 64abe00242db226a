import type { Auth } from '../auth/authenticate';
import { ApiError } from '../errors';

/**
 * Per-request facts established before Elysia's router runs (authentication happens before the body
 * is parsed so that the order of checks is 401 → 403 → 400). Keyed by the Request object.
 */
interface RequestFacts {
  id: string;
  started: number;
  auth?: Auth;
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

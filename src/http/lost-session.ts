import { type DatabaseCircuit, isConnectionGone } from '../db';
import { log } from '../log';
import { factsOf } from './context';

/**
 * A request whose database session ended under it (pg_terminate_backend, a pooler or failover that
 * closed the connection) while the database itself still answers is sent through the app once more,
 * on another connection, instead of being answered 503: the client did nothing wrong and the
 * database is there.
 *
 * Sending it again is safe where the failed attempt cannot have committed anything it did not also
 * answer: a session that ends delivers the results of the statements it completed first, so the
 * statement that failed did not commit, and each route below writes in one transaction (or one
 * statement) that is its last: an import's create too (src/imports/service.ts createImport). A read
 * repeats a read. Other routes (brand assignments, an import's cancel, suppression lists) answer 503
 * as before: their writes are not known to be one last commit.
 * One exception to "did not commit": a server killed between a commit and its answer (a failover).
 * A PATCH applied twice is the same patch; a contact's create that meets its own first attempt is
 * told so (resentAfterMs) and answers 201 as that attempt would have, not 409 or 200. An import's
 * create that meets its own first attempt answers 409 (the account's open import), as the client's
 * own retry after a 503 would.
 */
const AGAIN: ReadonlySet<string> = new Set([
  'GET',
  'HEAD',
  'PATCH /v1/contacts/:emailMd5',
  'POST /v1/contacts',
  'POST /v1/contact-imports',
]);

/** How many times one request is sent again. */
const MAX_AGAIN = 3;

/** Each request sent again below: when its first attempt began (performance.now()). */
const firstAttempts = new WeakMap<Request, number>();

/**
 * For a request sent again after its session was lost: ms since its first attempt began. A create's
 * first attempt may have committed after all (a server killed between the commit and its answer),
 * and the create must then answer as that attempt would have (src/contacts/service.ts).
 */
export function resentAfterMs(request: Request): number | undefined {
  const first = firstAttempts.get(request);
  return first === undefined ? undefined : performance.now() - first;
}

/**
 * `error` ended the session it met while the database may still be there: not the circuit's refusal,
 * which says a probe already found the database away.
 */
function isLostSession(error: unknown): boolean {
  return isConnectionGone(error) && (error as { code?: unknown }).code !== 'DATABASE_UNREACHABLE';
}

/** The app's error mapper saw `error`: remember whether it was the loss of the request's session. */
export function noteFailure(request: Request, error: unknown): void {
  const facts = factsOf(request);
  if (facts && isLostSession(error)) facts.lostSession = true;
}

/**
 * `work` run again when its session ended under it and a probe finds the database there, as a request
 * is sent again above: for a step that cannot resend its request (an upload's body is read once) but
 * whose database work is safe to repeat (a read, or one transaction that is its last write).
 */
export async function againOnLostSession<T>(
  what: string,
  work: () => Promise<T>,
  circuit: DatabaseCircuit | undefined,
): Promise<T> {
  for (let again = 0; ; again++) {
    try {
      return await work();
    } catch (e) {
      if (again >= MAX_AGAIN || !circuit || !isLostSession(e) || !(await circuit.check())) throw e;
      log('info', 'statement sent again: its database session ended under it and the database answers', { what });
    }
  }
}

/**
 * The response to give: `response`, or the app's answer to the same request sent again when the
 * first attempt was refused only because its session was lost and a probe finds the database there.
 */
export async function againAfterLostSession(
  request: Request,
  response: Response,
  handle: (request: Request) => Promise<Response>,
  circuit: DatabaseCircuit | undefined,
): Promise<{ response: Response; request: Request }> {
  let sent = { response, request };
  // pg_terminate_backend of every connection at once: the next attempt can meet another connection
  // whose end the pool has not read yet, so a few attempts, each after the probe found the database.
  for (let again = 1; again <= MAX_AGAIN; again++) {
    const next = await sendAgain(sent.request, sent.response, handle, circuit);
    if (!next) break;
    sent = next;
  }
  return sent;
}

async function sendAgain(
  request: Request,
  response: Response,
  handle: (request: Request) => Promise<Response>,
  circuit: DatabaseCircuit | undefined,
): Promise<{ response: Response; request: Request } | undefined> {
  const facts = factsOf(request);
  if (response.status !== 503 || !facts?.lostSession || !circuit) return undefined;
  // Before routing (the key's lookup) nothing was written; after it, the route must be one of AGAIN.
  const allowed =
    facts.route === undefined || AGAIN.has(request.method) || AGAIN.has(`${request.method} ${facts.route}`);
  const body = facts.body ?? (request.bodyUsed ? undefined : request.body);
  const bodyless = request.method === 'GET' || request.method === 'HEAD';
  if (!allowed || (!bodyless && request.bodyUsed && facts.body === undefined)) return undefined;
  if (!(await circuit.check())) return undefined;
  const headers = new Headers(request.headers);
  headers.set('x-request-id', facts.id);
  const again = new Request(request.url, {
    method: request.method,
    headers,
    body: bodyless ? undefined : body,
    duplex: 'half',
  } as RequestInit);
  firstAttempts.set(again, firstAttempts.get(request) ?? facts.started);
  log('info', 'request sent again: its database session ended under it and the database answers', {
    requestId: facts.id,
    route: facts.route ?? 'before routing',
  });
  return { response: await handle(again), request: again };
}

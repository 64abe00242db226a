import postgres from 'postgres';

/**
 * The one rule for "the database is away": the connection was lost or refused, or the server is
 * shutting down, crashed, or still starting up. Such a failure says nothing about the request or
 * the import that met it: the same work succeeds once PostgreSQL answers again. The API answers it
 * with 503 (src/http/unavailable.ts), the worker retries (worker/import/index.ts), and
 * src/db/pinned.ts takes it as the end of a pinned connection.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  if (error instanceof postgres.PostgresError) return SERVER_CODES.has(code) || code.startsWith('08');
  return CLIENT_CODES.has(code);
}

/**
 * SQLSTATEs: 57P01 admin_shutdown (also pg_terminate_backend), 57P02 crash_shutdown (another
 * backend crashed, or an immediate shutdown), 57P03 cannot_connect_now (starting up, in recovery,
 * shutting down), 53300 too_many_connections. Class 08 is connection exceptions.
 */
const SERVER_CODES = new Set(['57P01', '57P02', '57P03', '53300']);

/**
 * postgres.js's own connection errors, and the socket errors it passes through while connecting or
 * when a connection breaks. CONNECTION_ENDED is the pool being closed at shutdown. DATABASE_UNREACHABLE
 * is the API's circuit refusing a request while a probe says the database does not answer
 * (src/db/circuit.ts).
 */
const CLIENT_CODES = new Set([
  'DATABASE_UNREACHABLE',
  'CONNECTION_CLOSED',
  'CONNECTION_DESTROYED',
  'CONNECTION_ENDED',
  'CONNECT_TIMEOUT',
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/**
 * The session of the connection that met `error` has ended, and its locks, temporary state and
 * transaction with it: the database went away, or the server ended this one session (a FATAL or
 * PANIC error always closes the connection that receives it).
 */
export function isConnectionGone(error: unknown): boolean {
  if (isDatabaseUnavailable(error)) return true;
  const severity = (error as { severity?: unknown } | null)?.severity;
  return severity === 'FATAL' || severity === 'PANIC';
}

/** The codes of a session that ended under its client (the server's terminate, a socket closed or reset). */
const ENDED_SESSION_CODES = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_DESTROYED',
  'CONNECTION_ENDED',
  'ECONNRESET',
  'EPIPE',
  '57P01',
]);

/**
 * `error` ended a session that was open, which says nothing of whether the server is there; unlike a
 * refused or unanswered connection, which says it is away (src/db/circuit.ts's probe tells them apart).
 */
export function isSessionEnded(error: unknown): boolean {
  return ENDED_SESSION_CODES.has(String((error as { code?: unknown } | null)?.code));
}

/** What the API's circuit throws while a probe says the database does not answer (src/db/circuit.ts). */
export function databaseUnreachable(): Error {
  return Object.assign(new Error('the database does not answer (a probe failed); the request was not sent to it'), {
    code: 'DATABASE_UNREACHABLE',
  });
}

/** The error a pinned connection's statement gets once its connection is gone (the shape of postgres.js's own). */
export function connectionLost(cause?: unknown): Error {
  return Object.assign(
    new Error('write CONNECTION_CLOSED: the database connection of this transaction or reserved session was lost', {
      cause,
    }),
    {
      code: 'CONNECTION_CLOSED',
    },
  );
}

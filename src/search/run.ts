import type { Sql, Tx } from '../db';
import { ApiError } from '../errors';

/** PostgreSQL's query_canceled: here, the statement_timeout set below ran out. */
const QUERY_CANCELED = '57014';

/**
 * Runs a search's or count's statements in one transaction whose statements PostgreSQL cancels after
 * `timeoutMs` (SEARCH_TIMEOUT_MS): the database stops the work, not only the client waiting for it,
 * and the request gets a 504 problem instead of a connection held until the client gives up. On a
 * Citus cluster the coordinator cancels the statement's task on the account's node with it.
 * JIT is off: a page reads at most a few thousand rows, for which compiling the plan cost more than
 * it saved, and a count pays the compile on every request.
 */
export async function withSearchTimeout<T>(sql: Sql, timeoutMs: number, run: (tx: Tx) => Promise<T>): Promise<T> {
  try {
    return (await sql.begin(async (tx) => {
      await tx`select set_config('statement_timeout', ${String(timeoutMs)}, true), set_config('jit', 'off', true)`;
      return run(tx);
    })) as T;
  } catch (error) {
    if ((error as { code?: string }).code === QUERY_CANCELED) throw searchTimedOut(timeoutMs, error);
    throw error;
  }
}

/** 504: the statement ran past SEARCH_TIMEOUT_MS and was cancelled in the database. */
export const searchTimedOut = (timeoutMs: number, cause?: unknown) =>
  new ApiError(
    'api_error',
    `The search ran longer than ${timeoutMs} ms (SEARCH_TIMEOUT_MS) and was cancelled in the database. ` +
      'Nothing was changed; the operator sets this bound.',
    undefined,
    undefined,
    { cause, status: 504, title: 'Search timed out' },
  );

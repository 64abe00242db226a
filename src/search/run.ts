import type { Sql, Tx } from '../db';
import { ApiError } from '../errors';

/** PostgreSQL's query_canceled: here, the statement_timeout set below ran out. */
const QUERY_CANCELED = '57014';

/**
 * Settings of a search's transaction, as SET LOCAL statements: on a Citus cluster
 * citus.propagate_set_commands = 'local' sends them on to the account's node, which plans the
 * statement's task (on one PostgreSQL it is a setting no one reads).
 * - statement_timeout: PostgreSQL cancels the statement after SEARCH_TIMEOUT_MS. The database stops
 *   the work, not only the client waiting for it, and the request gets a 504 problem instead of a
 *   connection held until the client gives up.
 * - jit off: a page reads at most a few thousand rows, for which compiling the plan costs more than it
 *   saves, and a count would pay the compile on every request.
 * - for a page, enable_seqscan off: a page is read in email_md5 order and stops at its last row, which
 *   only the primary key's order gives without reading every contact first. With a condition the
 *   statistics think rare (contacts disabled since the last ANALYZE), the planner would rather read
 *   the whole account and sort it: at 25M contacts that is minutes, where the key's order finds a
 *   page in milliseconds unless the condition is rare indeed.
 * - for a count, no parallel workers: a count that scans the account takes one core, not all of them.
 *   With two workers on two cores, another account's GET p99 rose 4.6-5.7 × beside the counts
 *   (bench/findings/2026-12-06-search-1m-quiet.md); one backend leaves the other core to the rest.
 */
function settings(timeoutMs: number, kind: 'page' | 'count'): string {
  const ms = Math.trunc(timeoutMs); // a number of the config, never request text
  return [
    "set local citus.propagate_set_commands = 'local'",
    `set local statement_timeout = ${ms}`,
    'set local jit = off',
    ...(kind === 'page' ? ['set local enable_seqscan = off'] : ['set local max_parallel_workers_per_gather = 0']),
  ].join(';\n');
}

/** Runs a page's or a count's statement in one transaction with the settings above. */
export async function withSearchTimeout<T>(
  sql: Sql,
  timeoutMs: number,
  kind: 'page' | 'count',
  run: (tx: Tx) => Promise<T>,
): Promise<T> {
  try {
    return (await sql.begin(async (tx) => {
      // Simple protocol: several statements, no parameters (their values are the config's numbers).
      await tx.unsafe(settings(timeoutMs, kind));
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

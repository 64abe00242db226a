import { isDatabaseUnavailable } from '../db';
import { serviceUnavailable, type ApiError } from '../errors';

/**
 * Seconds a client is asked to wait while the database is away. A restart or failover takes a few
 * seconds; crash recovery after a long write burst can take longer, and clients then simply get
 * another 503 with the same advice.
 */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

/**
 * A failure that only says the database is away (src/db/unavailable.ts) becomes 503 api_error with
 * Retry-After: the request was fine and can be sent again as it is. Anything else is not this
 * module's to answer.
 */
export function unavailableError(error: unknown): ApiError | undefined {
  if (!isDatabaseUnavailable(error)) return undefined;
  return serviceUnavailable(
    'The database is unavailable right now; retry the request after Retry-After seconds.',
    DATABASE_RETRY_AFTER_SECONDS,
    error,
  );
}

import { isDatabaseUnavailable } from '../db';
import { serviceUnavailable, type ApiError } from '../errors';
import { errorFields, log } from '../log';
import { diskFullCause, isDiskFull } from '../storage/disk-full';

/**
 * Seconds a client is asked to wait while the database is away. A restart or failover takes a few
 * seconds; crash recovery after a long write burst can take longer, and clients then simply get
 * another 503 with the same advice.
 */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

/**
 * Seconds a client is asked to wait while a disk the service writes to is full: space comes back
 * when an operator frees it (or a large import's staging is dropped), not within a restart's
 * seconds, and a client retrying every few seconds only adds load to a server already refusing.
 */
export const DISK_FULL_RETRY_AFTER_SECONDS = 30;

/** At most one warning per this many ms while the disk stays full: the operator needs it once, not per request. */
const DISK_FULL_LOG_GAP_MS = 10_000;
let lastDiskFullLog = 0;

/**
 * A failure that only says the database is away (src/db/unavailable.ts) or a disk is full
 * (src/storage/disk-full.ts) becomes 503 api_error with Retry-After: the request was fine and can be
 * sent again as it is. Not 507 Insufficient Storage: a contact write is a few hundred bytes, so it
 * is not the request that does not fit but anything at all, and the same request succeeds once
 * space is freed (the spec's codes have no other; api_error's status is the server's to choose).
 * Anything else is not this module's to answer.
 */
export function unavailableError(error: unknown): ApiError | undefined {
  if (isDiskFull(error)) {
    if (Date.now() - lastDiskFullLog >= DISK_FULL_LOG_GAP_MS) {
      lastDiskFullLog = Date.now();
      log('warn', `requests refused with 503: ${diskFullCause(error)}`, errorFields(error));
    }
    return serviceUnavailable(
      'The service cannot store anything right now (its disk is full); retry the request after Retry-After seconds.',
      DISK_FULL_RETRY_AFTER_SECONDS,
      error,
    );
  }
  if (!isDatabaseUnavailable(error)) return undefined;
  return serviceUnavailable(
    'The database is unavailable right now; retry the request after Retry-After seconds.',
    DATABASE_RETRY_AFTER_SECONDS,
    error,
  );
}

import { isSuspended, SUSPENDED_DETAIL } from '../auth/suspension';
import type { Deps } from '../deps';
import { errorFields, log } from '../log';
import { importObjectKey } from '../storage';
import { EntityTooLargeError, LocalStore, MAX_UPLOAD_BYTES, type Received } from '../storage/local';
import { accessDenied, entityTooLarge, insufficientStorage, s3Error } from './s3-error';
import { completeUpload, uploadWindow } from './complete';
import { gzipBody, NotGzipError, uploadEncoding } from './encoding';
import { isDatabaseUnavailable } from '../db';
import { DATABASE_RETRY_AFTER_SECONDS, DISK_FULL_RETRY_AFTER_SECONDS } from '../http/unavailable';
import { diskFullCause, isDiskFull } from '../storage/disk-full';
import { againOnLostSession } from '../http/lost-session';

class WindowClosedError extends Error {}

const PREFIX = '/uploads/';

/**
 * `PUT /uploads/<token>`: the local store's presigned upload link. It behaves like an S3 presigned
 * PUT (XML errors, start before expiry, 5 GB limit, atomic object) and, unlike S3, knows at once
 * when a file arrived, so it marks the import uploaded and enqueues it without waiting for a sweep.
 * No Authorization header: the HMAC token is the credential.
 *
 * Beyond the contract, a gzip file is accepted (`Content-Encoding: gzip` or not) and stored as sent:
 * the limit counts the bytes uploaded, and the worker decompresses it while it reads. A body declared
 * gzip that does not start with gzip's magic bytes, or another coding, is refused before it is stored.
 */
export function uploadHandler(deps: Deps, opts: { maxBytes?: number } = {}): (request: Request) => Promise<Response> {
  const handle = handleUpload(deps, opts.maxBytes ?? MAX_UPLOAD_BYTES);
  return async (request) => {
    try {
      const admitted = deps.circuit?.admit();
      if (admitted) await admitted;
      return await handle(request);
    } catch (e) {
      deps.circuit?.failed(e);
      // The database being away is S3's 503 (clients retry it on their own), not an internal error.
      if (isDatabaseUnavailable(e)) {
        log('warn', 'upload refused: the database is unavailable', errorFields(e));
        return s3Error(503, 'ServiceUnavailable', 'Service is unable to handle request.', {
          'retry-after': String(DATABASE_RETRY_AFTER_SECONDS),
        });
      }
      if (isDiskFull(e)) {
        log('warn', `upload refused: ${diskFullCause(e)}`, errorFields(e));
        // The body was stored but could not be made the object (its pointer file did not fit), or the
        // database could not record it: nothing is visible, the received file is gone (below).
        if ((e as { code?: unknown }).code !== '53100') return insufficientStorage(DISK_FULL_RETRY_AFTER_SECONDS);
        return s3Error(503, 'ServiceUnavailable', 'Service is unable to handle request.', {
          'retry-after': String(DISK_FULL_RETRY_AFTER_SECONDS),
        });
      }
      log('error', 'upload failed', errorFields(e));
      return s3Error(500, 'InternalError', 'We encountered an internal error. Please try again.');
    }
  };
}

function handleUpload(deps: Deps, maxBytes: number) {
  return async (request: Request): Promise<Response> => {
    const store = deps.storage;
    if (!(store instanceof LocalStore))
      return s3Error(404, 'NoSuchUpload', 'Uploads go to the object store this service is configured with.');
    if (request.method !== 'PUT')
      return s3Error(405, 'MethodNotAllowed', 'The specified method is not allowed against this resource.', {
        allow: 'PUT',
      });
    const grant = store.tokens.verify(new URL(request.url).pathname.slice(PREFIX.length));
    if (!grant) return accessDenied('The upload link is not valid.');
    if (Date.now() >= grant.expiresAt * 1000) return accessDenied('Request has expired');
    const declared = request.headers.get('content-length');
    if (declared !== null && Number(declared) > maxBytes) return entityTooLarge(maxBytes);
    const encoding = uploadEncoding(request.headers.get('content-encoding'));
    if (!encoding)
      return s3Error(
        400,
        'InvalidArgument',
        'Unsupported Content-Encoding: send the file as it is, or gzip-compressed with Content-Encoding: gzip.',
      );

    const { accountId, importId } = grant;
    // Refused before a byte is stored. The worker is the last gate: a file that slipped in as the
    // suspension committed waits, unimported, until the account is unsuspended (worker/import/index.ts).
    if (await againOnLostSession('upload suspension', () => isSuspended(deps.sql, accountId), deps.circuit))
      return accessDenied(SUSPENDED_DETAIL);
    // The body is read once, so the request cannot be sent again after a lost session
    // (http/lost-session.ts): its statements are, the window's a read, completeUpload one last commit.
    const window = await againOnLostSession(
      'upload window',
      () => uploadWindow(deps.sql, accountId, importId),
      deps.circuit,
    );
    if (!window.open)
      return accessDenied('This import no longer accepts a file. Create a new import and use its link.');
    const deadline = Date.now() + window.msLeft;

    const key = importObjectKey(accountId, importId);
    let received: Received;
    try {
      const body = request.body ?? emptyBody();
      received = await store.receive(key, encoding === 'gzip' ? gzipBody(body) : body, maxBytes, () => {
        if (Date.now() > deadline) throw new WindowClosedError();
      });
    } catch (e) {
      if (e instanceof EntityTooLargeError) return entityTooLarge(maxBytes);
      if (e instanceof NotGzipError)
        return s3Error(
          400,
          'InvalidRequest',
          'The request says Content-Encoding: gzip, but the body is not gzip data (it does not start with 1f 8b).',
        );
      if (e instanceof WindowClosedError)
        return accessDenied('The import was not uploaded within 24 hours of its creation.');
      // receive() deleted its temp file: a body cut short by a full disk leaves nothing behind.
      if (isDiskFull(e)) {
        log('warn', `upload refused: ${diskFullCause(e)}`, { importId, ...errorFields(e) });
        return insufficientStorage(DISK_FULL_RETRY_AFTER_SECONDS);
      }
      log('warn', 'upload aborted', { importId, ...errorFields(e) });
      return s3Error(400, 'IncompleteBody', 'The upload did not complete.');
    }

    let accepted = false;
    try {
      accepted = await againOnLostSession(
        'upload complete',
        () => completeUpload(deps.sql, store, accountId, importId, key, received),
        deps.circuit,
      );
    } finally {
      if (!accepted) await store.discard(received);
    }
    if (!accepted) return accessDenied('This import no longer accepts a file. Create a new import and use its link.');

    // A failed enqueue is not the client's problem: the sweeper re-enqueues uploaded imports.
    await deps.queue
      ?.enqueueImport(accountId, importId)
      .catch((e) =>
        log('warn', 'enqueue after upload failed; the sweeper will retry', { importId, ...errorFields(e) }),
      );
    await store
      .prune(key)
      .catch((e) => log('warn', 'pruning old upload versions failed', { importId, ...errorFields(e) }));
    log('info', 'contact import uploaded', { accountId, importId, size: received.size });
    return new Response(null, { status: 200, headers: { etag: `"${received.md5}"` } });
  };
}

async function* emptyBody(): AsyncIterable<Uint8Array> {}

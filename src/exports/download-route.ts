import { Readable } from 'node:stream';
import { isSuspended, SUSPENDED_DETAIL } from '../auth/suspension';
import type { Deps } from '../deps';
import { forbidden } from '../errors';
import { ObjectChangedError } from '../storage/store';
import { exportFileName, type DownloadLinks } from './download';

const refuse = (status: number, text: string) =>
  new Response(text, { status, headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' } });

/**
 * `GET /downloads/<token>`: the local store's download link of an export's file, what a presigned
 * GET is on S3. 403 for a forged or expired link, 403 `permission_error` while the account is suspended,
 * 404 once the file is gone (its retention ended).
 */
export async function downloadResponse(deps: Deps, links: DownloadLinks, token: string): Promise<Response> {
  const grant = await links.verify(token);
  if (!grant) return refuse(403, 'The download link is not valid.');
  if (Date.now() >= grant.expiresAt * 1000) return refuse(403, 'The download link has expired.');
  // A link handed out before the suspension is the account's too: 403 in the API's envelope, as its keys get.
  if (await isSuspended(deps.sql, grant.accountId)) throw forbidden(SUSPENDED_DETAIL);
  const [row] = await deps.sql<{ object_key: string | null; compression: string }[]>`
    select object_key, compression from contact_exports
    where account_id = ${grant.accountId} and id = ${grant.exportId} and status = 'success'
      and file_expires_at > now()`;
  if (!row?.object_key || !deps.storage) return refuse(404, 'The export file is no longer kept.');
  let body: Readable;
  try {
    body = await deps.storage.read(row.object_key);
  } catch (e) {
    if (e instanceof ObjectChangedError) return refuse(404, 'The export file is no longer kept.');
    throw e;
  }
  const gzip = row.compression === 'gzip';
  return new Response(Readable.toWeb(body) as ReadableStream, {
    headers: {
      // The file as stored: a gzip file is served as one, not with Content-Encoding a client would undo.
      'content-type': gzip ? 'application/gzip' : 'text/csv; charset=utf-8',
      'content-disposition': `attachment; filename="${exportFileName(grant.exportId, gzip)}"`,
      'cache-control': 'private, no-store',
    },
  });
}

const escape = (s: string) => s.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * An S3-style XML error, so clients written against S3 read the local store's refusals the same
 * way. These are not problem+json: the upload link is the object store's interface, not /v1's.
 */
export function s3Error(status: number, code: string, message: string, headers: Record<string, string> = {}): Response {
  const body =
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<Error><Code>${escape(code)}</Code><Message>${escape(message)}</Message></Error>`;
  return new Response(body, { status, headers: { 'content-type': 'application/xml', ...headers } });
}

export const accessDenied = (message: string) => s3Error(403, 'AccessDenied', message);
export const entityTooLarge = (max: number) =>
  s3Error(400, 'EntityTooLarge', `Your proposed upload exceeds the maximum allowed size of ${max} bytes.`);
/**
 * The store's disk has no room for the body: 507, as MinIO answers its storage-full condition (S3
 * itself never says it). Not S3's 503 ServiceUnavailable, which SDKs retry at once by themselves,
 * sending the whole file again into the same full disk.
 */
export const insufficientStorage = (retryAfterSeconds: number) =>
  s3Error(
    507,
    'InsufficientStorage',
    'The object store has no space left for this upload; nothing was stored. Send it again once space is freed.',
    { 'retry-after': String(retryAfterSeconds) },
  );

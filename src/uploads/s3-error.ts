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

/**
 * What the upload link accepts as Content-Encoding: none (or identity), or gzip. The file is stored
 * as sent either way; the worker recognises gzip by its first bytes (worker/import/decompress.ts),
 * so the header only lets the link refuse a body that cannot be what it says at once.
 */
export type UploadEncoding = 'identity' | 'gzip';

/** The body's coding from the header, or undefined for one the import cannot read (br, deflate, two codings). */
export function uploadEncoding(header: string | null): UploadEncoding | undefined {
  const codings = (header ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length === 0) return 'identity';
  if (codings.length === 1 && (codings[0] === 'gzip' || codings[0] === 'x-gzip')) return 'gzip';
  return undefined;
}

/** Thrown by `gzipBody` when the body does not start with the gzip magic bytes. */
export class NotGzipError extends Error {}

/**
 * `body` unchanged, checked on the way: its first two bytes must be gzip's 1f 8b (they may arrive
 * in separate chunks). Nothing is buffered beyond the chunk in hand.
 */
export async function* gzipBody(body: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const magic = [0x1f, 0x8b];
  let seen = 0;
  for await (const chunk of body) {
    for (let i = 0; seen < 2 && i < chunk.byteLength; i++, seen++)
      if (chunk[i] !== magic[seen]) throw new NotGzipError('the body is not gzip data');
    yield chunk;
  }
  if (seen < 2) throw new NotGzipError('the body is not gzip data');
}

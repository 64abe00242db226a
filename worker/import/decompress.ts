import { pipeline, Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { MAX_UPLOAD_BYTES } from '../../src/storage/local';
import { ImportFileError } from './errors';

/**
 * How far a gzip upload may expand: a generous multiple of the upload limit (a CSV compresses 4 to
 * 10 times), so a decompression bomb (a few MB that expand to terabytes) fails instead of filling
 * the staging table's disk.
 */
export const MAX_DECOMPRESSED_BYTES = 4 * MAX_UPLOAD_BYTES;

/**
 * zlib's output chunk. Measured in Bun 1.4 on a 106 MB CSV (25 MB gzip): node:zlib createGunzip
 * gives ~380 MB/s with its default 16 KB chunks and ~770 MB/s with 256 KB ones, DecompressionStream
 * ~650 MB/s; Bun.gunzipSync (~850 MB/s) needs the whole file in memory.
 */
const GUNZIP_CHUNK = 256 * 1024;

const isGzip = (b: Uint8Array) => b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b;

/**
 * The object's plain bytes: gunzipped while streaming when it starts with the gzip magic bytes
 * (1f 8b), whether or not the PUT said `Content-Encoding: gzip`; anything else passes through
 * untouched. Concatenated gzip members (a multi-member .gz) are read one after another.
 *
 * Memory stays flat: the source is read only as fast as the caller takes the output (stream
 * backpressure), and each buffer is bounded. Errors of the data itself are ImportFileError (the
 * import fails with that reason): corrupt or truncated gzip, a file compressed twice, an expansion
 * past `maxBytes`. An error of the source (network, object store) passes through as it is, to be
 * retried. Breaking off the iteration destroys the source.
 *
 * @example readPhase: `utf8Text(decompressed(await openObject(store, key, etag)))`
 */
export async function* decompressed(
  source: AsyncIterable<Uint8Array>,
  maxBytes = MAX_DECOMPRESSED_BYTES,
  /** told, before the first bytes come out, whether the object is gzip */
  format?: (gzip: boolean) => void,
): AsyncGenerator<Uint8Array> {
  const it = source[Symbol.asyncIterator]();
  // Peek: collect chunks until there are two bytes to look at (a first chunk of one byte is legal).
  const head: Uint8Array[] = [];
  let headBytes = 0;
  let ended = false;
  try {
    while (headBytes < 2) {
      const r = await it.next();
      if (r.done) {
        ended = true;
        break;
      }
      head.push(r.value);
      headBytes += r.value.byteLength;
    }
  } catch (e) {
    await it.return?.();
    throw e;
  }
  const first = head.length === 1 ? head[0]! : Buffer.concat(head);
  try {
    format?.(isGzip(first));
    if (isGzip(first)) yield* gunzipped(first, ended ? undefined : it, maxBytes);
    else {
      // Passed through untouched, chunk by chunk.
      if (first.byteLength > 0) yield first;
      if (ended) return;
      for (;;) {
        const r = await it.next();
        if (r.done) return;
        yield r.value;
      }
    }
  } finally {
    // Also when the caller stops early: the source is closed, not left open.
    await it.return?.();
  }
}

async function* gunzipped(
  first: Uint8Array,
  rest: AsyncIterator<Uint8Array> | undefined,
  maxBytes: number,
): AsyncGenerator<Uint8Array> {
  async function* compressed(): AsyncGenerator<Uint8Array> {
    yield first;
    for (;;) {
      const r = await rest?.next();
      if (!r || r.done) return;
      yield r.value;
    }
  }
  const gunzip = createGunzip({ chunkSize: GUNZIP_CHUNK });
  // Errors reach the loop below through the gunzip stream, which pipeline destroys with them.
  pipeline(Readable.from(compressed(), { objectMode: false }), gunzip, () => {});
  let out = 0;
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) {
      if (out === 0 && isGzip(chunk))
        throw new ImportFileError(
          'The file is gzip-compressed twice: after decompressing it is gzip data again. Compress it once.',
        );
      out += chunk.byteLength;
      if (out > maxBytes)
        throw new ImportFileError(
          `The gzip file expands to more than ${maxBytes} bytes. Split it and import the parts one after another.`,
        );
      yield chunk;
    }
  } catch (e) {
    throw gzipError(e) ?? e;
  } finally {
    gunzip.destroy();
  }
}

/** The ImportFileError for a zlib error (its code is Z_*), or undefined for any other error. */
function gzipError(e: unknown): ImportFileError | undefined {
  const code = (e as { code?: unknown }).code;
  if (typeof code !== 'string' || !code.startsWith('Z_')) return undefined;
  const detail = (e as Error).message;
  // zlib says "unexpected end of file" (Z_BUF_ERROR) when the input ends inside a gzip member.
  if (code === 'Z_BUF_ERROR')
    return new ImportFileError('The gzip stream ends early: the file is truncated.', { cause: e });
  return new ImportFileError(`The file is not valid gzip data (${detail}): it is corrupt.`, { cause: e });
}

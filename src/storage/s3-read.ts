import { Readable } from 'node:stream';
import { GetObjectCommand, type GetObjectCommandOutput, type S3Client } from '@aws-sdk/client-s3';
import { ObjectReadError } from './store';

export interface ResumableReadOptions {
  /** Silence in a body longer than this is a stalled connection: dropped and resumed. */
  idleMs: number;
  /** Resumes in a row that bring no byte before the read fails: as many requests, with `resumeClient`. */
  attempts: number;
  /**
   * The client of the Range GETs: one that makes one attempt per request (maxAttempts 1), since the
   * resumes are this loop's retries. With the SDK's retries too, a store that stays down would take
   * attempts × the SDK's attempts requests, each up to the request timeout, before the read fails.
   */
  resumeClient: S3Client;
}

/**
 * Streams an object from S3 to its last byte, whatever happens to the connection on the way.
 *
 * The SDK retries a request until its answer's head arrives; the body after that is a bare
 * socket: a reset, a stall, or a close before Content-Length bytes arrived (a truncated body)
 * would otherwise end or break the stream half way. Here the bytes are counted, and a body that
 * breaks, goes silent for `idleMs` or ends short is dropped and the rest asked for again with a
 * Range GET from the first missing byte, pinned to the first answer's ETag (IfMatch) so the rest
 * comes from the same object. A resume that brings bytes resets the count of attempts: a long read
 * over a flaky link goes on as long as it moves. A stream that ends, ends with every byte.
 *
 * The first request is made before this returns, so a missing or replaced object throws here.
 */
export async function resumableRead(
  client: S3Client,
  input: { Bucket: string; Key: string; IfMatch?: string },
  opts: ResumableReadOptions,
): Promise<Readable> {
  // identity: the stored bytes as they are. An object PUT with Content-Encoding: gzip is served with that
  // header, and an HTTP client that decodes it (Bun's fetch does) would hide the gzip the worker reads itself.
  const get = (via: S3Client, extra: { IfMatch?: string; Range?: string }) =>
    via.send(new GetObjectCommand({ ...input, ResponseContentEncoding: 'identity', ...extra }));
  const first = await get(client, { IfMatch: input.IfMatch });
  const size = first.ContentLength ?? 0;
  const etag = input.IfMatch ?? first.ETag;
  return Readable.from(
    chunks(first, size, (at) => get(opts.resumeClient, { IfMatch: etag, Range: `bytes=${at}-` }), input.Key, opts),
    {
      objectMode: false,
    },
  );
}

async function* chunks(
  first: GetObjectCommandOutput,
  size: number,
  rest: (at: number) => Promise<GetObjectCommandOutput>,
  key: string,
  opts: ResumableReadOptions,
): AsyncGenerator<Uint8Array> {
  let body: Readable | undefined = first.Body as Readable;
  let at = 0;
  let failures = 0;
  try {
    for (;;) {
      try {
        if (!body) {
          const answer = await rest(at);
          checkRange(answer, at, size, key);
          body = answer.Body as Readable;
        }
        for (;;) {
          const chunk = await nextWithin(body, opts.idleMs);
          if (chunk === undefined) break;
          at += chunk.byteLength;
          if (at > size) throw new ObjectReadError(`the body of ${key} is longer than its ${size} bytes`, false);
          failures = 0;
          yield chunk;
        }
        if (at === size) return;
        throw new Error(`the body ended after ${at} of its ${size} bytes`);
      } catch (e) {
        drop(body);
        body = undefined;
        // A connection that broke after the last byte lost nothing.
        if (at === size && !(e instanceof ObjectReadError)) return;
        if (permanent(e) || ++failures > opts.attempts)
          throw new ObjectReadError(`reading ${key} failed at byte ${at} of ${size}: ${String(e)}`, !permanent(e), {
            cause: e,
          });
        await Bun.sleep(backoffMs(failures));
      }
    }
  } finally {
    drop(body);
  }
}

/** The next chunk of `body`, undefined at its end; a silence past `ms` throws. */
function nextWithin(body: Readable, ms: number): Promise<Uint8Array | undefined> {
  return new Promise((resolve, reject) => {
    const done = (fn: () => void) => {
      clearTimeout(timer);
      body.off('readable', onReadable);
      body.off('end', onEnd);
      body.off('error', onError);
      body.off('close', onClose);
      fn();
    };
    const onReadable = () => {
      const chunk = body.read() as Uint8Array | null;
      if (chunk !== null) done(() => resolve(chunk));
    };
    const onEnd = () => done(() => resolve(undefined));
    const onError = (e: Error) => done(() => reject(e));
    // Closed without 'end': the connection went before the body was over.
    const onClose = () =>
      done(() => (body.readableEnded ? resolve(undefined) : reject(new Error('body closed early'))));
    const timer = setTimeout(() => done(() => reject(new Error(`no byte for ${ms} ms: the connection stalled`))), ms);
    if (body.readableEnded) return done(() => resolve(undefined));
    if (body.errored) return done(() => reject(body.errored));
    body.on('readable', onReadable);
    body.on('end', onEnd);
    body.on('error', onError);
    body.on('close', onClose);
    onReadable();
  });
}

/** The answer to a Range GET must be that range, of an object of the same size. */
function checkRange(answer: GetObjectCommandOutput, at: number, size: number, key: string): void {
  const range = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(answer.ContentRange ?? '');
  if (!range || Number(range[1]) !== at || Number(range[3]) !== size) {
    drop(answer.Body as Readable);
    throw new ObjectReadError(
      `the store answered a read of ${key} from byte ${at} with "${answer.ContentRange}"`,
      false,
    );
  }
}

/** Gone (404), replaced since the first answer (412), or an answer that cannot be resumed. */
function permanent(e: unknown): boolean {
  const status = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  return e instanceof ObjectReadError || status === 404 || status === 412 || status === 416;
}

/** Exponential from 100 ms with full jitter, at most 5 s: a flaky link is asked again soon, a sick store less often. */
function backoffMs(failures: number): number {
  return Math.random() * Math.min(5_000, 100 * 2 ** failures);
}

/** Closes a body no longer read; its late errors must not reach the process as unhandled. */
function drop(body: Readable | undefined): void {
  if (!body) return;
  body.on('error', () => {});
  body.destroy();
}

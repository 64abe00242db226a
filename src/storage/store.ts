import type { Readable } from 'node:stream';

/** Size and ETag of a stored object; the ETag is quoted, as S3 returns it. */
export interface ObjectInfo {
  size: number;
  etag: string;
  /** When the object arrived, where the store knows it (S3 Last-Modified). */
  lastModified?: Date;
}

/** What an upload link is for: the object key it writes and the import it belongs to. */
export interface UploadTarget {
  key: string;
  accountId: string;
  importId: string;
  expiresAt: Date;
}

/** Thrown by `read` when the object is gone or no longer matches the pinned ETag. */
export class ObjectChangedError extends Error {}

/**
 * A read's stream fails with this when it could not bring the object to its end: the store stayed
 * away through every resume (`unavailable`), or answered what cannot be the object's rest.
 */
export class ObjectReadError extends Error {
  constructor(
    message: string,
    readonly unavailable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * Whether an object store failure says the store is away or overloaded (no answer, a timeout, a
 * reset, throttling, a 5xx, a read it kept breaking), not that the request was wrong: retried, or
 * waited out. The one rule; a 4xx (denied, missing, replaced) is not.
 */
export function isStoreUnavailable(e: unknown): boolean {
  if (e instanceof ObjectReadError) return e.unavailable;
  const err = e as { name?: string; code?: string; $metadata?: { httpStatusCode?: number } } | undefined;
  const status = err?.$metadata?.httpStatusCode;
  if (status !== undefined) return status === 429 || status >= 500;
  return err?.name === 'TimeoutError' || NETWORK_CODES.has(err?.code ?? '');
}

export interface ReadOptions {
  chunkBytes?: number;
}

/** The object store behind contact-import uploads: S3-compatible or the embedded local one. */
export interface ObjectStore {
  readonly driver: 'local' | 's3';
  /** A URL the client PUTs the file to; the upload must start before `expiresAt`. */
  presignUpload(target: UploadTarget): Promise<string>;
  /** Size and ETag of an object, or undefined when it has not arrived. */
  head(key: string): Promise<ObjectInfo | undefined>;
  /**
   * Streams the object; with `etag` (from `head`), throws ObjectChangedError if the object was
   * replaced since, so a later PUT is never imported. `chunkBytes` asks for chunks of that size
   * where the store decides them (the local one; S3's come as the network delivers them).
   */
  read(key: string, etag?: string, opts?: ReadOptions): Promise<Readable>;
  /** Stores a local file under `key` (the admin `import` command of manual uploads). */
  putFile(key: string, path: string): Promise<ObjectInfo>;
  /** Deletes the object; no error when it does not exist. */
  remove(key: string): Promise<void>;
}

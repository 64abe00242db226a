import type { Readable } from 'node:stream';

/** The object store behind contact-import uploads: S3-compatible or the embedded local one. */
export interface ObjectStore {
  readonly driver: 'local' | 's3';
  /** A URL the client PUTs the file to, valid until `expiresAt`. */
  presignUpload(key: string, importId: string, expiresAt: Date): Promise<string>;
  /** Size and ETag of an object, or undefined when it has not arrived. */
  head(key: string): Promise<{ size: number; etag: string } | undefined>;
  /** Streams the object; with `etag`, fails if the object changed since it was pinned. */
  read(key: string, etag?: string): Promise<Readable>;
  remove(key: string): Promise<void>;
}

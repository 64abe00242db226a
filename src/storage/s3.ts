import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { DeleteObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { StorageConfig } from '../config';
import { errorFields, log } from '../log';
import { resumableRead } from './s3-read';
import { isStoreUnavailable, ObjectChangedError, type ObjectInfo, type ObjectStore, type UploadTarget } from './store';

type S3Config = Extract<StorageConfig, { driver: 's3' }>;

/** Any S3-compatible store (AWS S3, MinIO, R2). Arrival of an upload is noticed by the sweeper. */
export class S3Store implements ObjectStore {
  readonly driver = 's3' as const;
  readonly client: S3Client;
  /** Signs the presigned links: the client of S3_PUBLIC_ENDPOINT when set (a link's host is signed), else `client`. */
  readonly signer: S3Client;
  readonly bucket: string;
  private readonly faults: { requestTimeoutMs: number; maxAttempts: number };
  /** A read's resumes: one attempt per request, the read retrying them itself (s3-read.ts). */
  private readonly resumeClient: S3Client;

  constructor(config: S3Config) {
    this.bucket = config.bucket;
    this.faults = { requestTimeoutMs: config.requestTimeoutMs, maxAttempts: config.maxAttempts };
    this.client = s3Client(config, config.endpoint);
    this.resumeClient = s3Client({ ...config, maxAttempts: 1 }, config.endpoint);
    this.signer = config.publicEndpoint ? s3Client(config, config.publicEndpoint) : this.client;
  }

  async presignUpload(target: UploadTarget): Promise<string> {
    const expiresIn = Math.max(1, Math.round((target.expiresAt.getTime() - Date.now()) / 1000));
    return getSignedUrl(this.signer, new PutObjectCommand({ Bucket: this.bucket, Key: target.key }), { expiresIn });
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    try {
      const h = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return {
        size: h.ContentLength ?? 0,
        etag: h.ETag ?? '',
        ...(h.LastModified && { lastModified: h.LastModified }),
      };
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw e;
    }
  }

  // ReadOptions' chunk size does not apply: the body's chunks are what the network delivers.
  async read(key: string, etag?: string): Promise<Readable> {
    try {
      return await resumableRead(
        this.client,
        { Bucket: this.bucket, Key: key, IfMatch: etag },
        { idleMs: this.faults.requestTimeoutMs, attempts: this.faults.maxAttempts, resumeClient: this.resumeClient },
      );
    } catch (e) {
      const status = statusOf(e);
      if (status === 412 || status === 404)
        throw new ObjectChangedError(`object ${key} is gone or no longer has ETag ${etag}`, { cause: e });
      throw e;
    }
  }

  /**
   * The SDK does not retry a request whose body is a stream (it cannot send it again), so this
   * does, with the file opened anew each time. A big file's PUT takes longer than one request is
   * otherwise allowed: its bound grows with the size.
   */
  async putFile(key: string, path: string): Promise<ObjectInfo> {
    const { size } = await stat(path);
    const requestTimeout = this.faults.requestTimeoutMs + Math.ceil(size / MIN_UPLOAD_BYTES_PER_MS);
    for (let attempt = 1; ; attempt++) {
      try {
        const put = await this.client.send(
          new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: createReadStream(path), ContentLength: size }),
          { requestTimeout },
        );
        return { size, etag: put.ETag ?? '' };
      } catch (e) {
        if (!isStoreUnavailable(e) || attempt >= this.faults.maxAttempts) throw e;
        log('warn', 'object store PUT failed; trying again', { key, attempt, ...errorFields(e) });
        await Bun.sleep(Math.random() * Math.min(5_000, 100 * 2 ** attempt));
      }
    }
  }

  async remove(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }
}

function s3Client(config: S3Config, endpoint: string | undefined): S3Client {
  return new S3Client({
    region: config.region,
    endpoint,
    forcePathStyle: config.forcePathStyle,
    credentials:
      config.accessKeyId && config.secretAccessKey
        ? { accessKeyId: config.accessKeyId, secretAccessKey: config.secretAccessKey }
        : undefined,
    // Otherwise presigned PUT URLs carry the CRC32 of an empty body and S3-compatible stores refuse uploads.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // The SDK's standard mode: 500s, 503 SlowDown, resets and timeouts retried with jittered exponential
    // backoff, up to maxAttempts in all. Its handler sets no timeout of its own, and a requestTimeout
    // without throwOnRequestTimeout only logs a warning: a stalled store would hang the request for good.
    retryMode: 'standard',
    logger: SDK_LOGGER,
    maxAttempts: config.maxAttempts,
    requestHandler: {
      connectionTimeout: config.requestTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      throwOnRequestTimeout: true,
    },
  });
}

/**
 * The SDK's own log: it reports every failed command (which the callers here log, or retry and
 * log) and warns of retries it does not make (putFile's, which retries itself). Kept for debugging.
 */
const SDK_LOGGER = {
  debug: () => {},
  info: () => {},
  warn: (...content: unknown[]) => log('debug', 'object store client warning', { content: content.map(text) }),
  error: (...content: unknown[]) => log('debug', 'object store client error', { content: content.map(text) }),
};
const text = (c: unknown) => (c instanceof Error ? c.message : typeof c === 'string' ? c : JSON.stringify(c));

/** A file PUT may take its request timeout plus 1 ms per KiB: it must move at 1 MiB/s at least. */
const MIN_UPLOAD_BYTES_PER_MS = 1024;

function statusOf(e: unknown): number | undefined {
  return (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
}

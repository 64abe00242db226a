import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { StorageConfig } from '../config';
import { ObjectChangedError, type ObjectInfo, type ObjectStore, type UploadTarget } from './store';

type S3Config = Extract<StorageConfig, { driver: 's3' }>;

/** Any S3-compatible store (AWS S3, MinIO, R2). Arrival of an upload is noticed by the sweeper. */
export class S3Store implements ObjectStore {
  readonly driver = 's3' as const;
  readonly client: S3Client;
  readonly bucket: string;

  constructor(config: S3Config) {
    this.bucket = config.bucket;
    this.client = new S3Client({
      region: config.region,
      endpoint: config.endpoint,
      forcePathStyle: config.forcePathStyle,
      credentials:
        config.accessKeyId && config.secretAccessKey
          ? { accessKeyId: config.accessKeyId, secretAccessKey: config.secretAccessKey }
          : undefined,
      // Otherwise presigned PUT URLs carry the CRC32 of an empty body and S3-compatible stores refuse uploads.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async presignUpload(target: UploadTarget): Promise<string> {
    const expiresIn = Math.max(1, Math.round((target.expiresAt.getTime() - Date.now()) / 1000));
    return getSignedUrl(this.client, new PutObjectCommand({ Bucket: this.bucket, Key: target.key }), { expiresIn });
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
      // identity: the stored bytes as they are. An object PUT with Content-Encoding: gzip is served with that
      // header, and an HTTP client that decodes it (Bun's fetch does) would hide the gzip the worker reads itself.
      const o = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: key, IfMatch: etag, ResponseContentEncoding: 'identity' }),
      );
      // Under Bun and Node the SDK's HTTP handler yields an IncomingMessage, a Node Readable.
      return o.Body as Readable;
    } catch (e) {
      const status = statusOf(e);
      if (status === 412 || status === 404)
        throw new ObjectChangedError(`object ${key} is gone or no longer has ETag ${etag}`, { cause: e });
      throw e;
    }
  }

  async putFile(key: string, path: string): Promise<ObjectInfo> {
    const { size } = await stat(path);
    const put = await this.client.send(
      new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: createReadStream(path), ContentLength: size }),
    );
    return { size, etag: put.ETag ?? '' };
  }

  async remove(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }
}

function statusOf(e: unknown): number | undefined {
  return (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
}

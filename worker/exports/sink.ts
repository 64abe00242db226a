import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { LocalStore } from '../../src/storage/local';
import { S3Store } from '../../src/storage/s3';
import type { ObjectStore } from '../../src/storage/store';

/**
 * Bytes of one S3 part: above S3's 5 MiB minimum, and 10,000 parts (S3's maximum) make 160 GiB. The
 * one part being filled is the worker's only buffer of the file: memory stays flat whatever its size.
 */
const PART_BYTES = 16 * 1024 * 1024;

/**
 * Writes `body` as the object `key`, streaming: an S3 multipart upload (its id handed to
 * `onUpload` first, so a run taking the export over can abort it), or the local store's temp file
 * renamed into place. Nothing is visible under `key` unless the whole body was written. On S3 the
 * object keeps `contentType`, which a presigned GET answers with (the local store's download route
 * sets its own).
 */
export async function writeObject(
  storage: ObjectStore,
  key: string,
  body: AsyncIterable<Uint8Array>,
  contentType: string,
  onUpload: (uploadId: string) => Promise<void>,
): Promise<number> {
  if (storage instanceof LocalStore) {
    const received = await storage.receive(key, body, Number.MAX_SAFE_INTEGER);
    await storage.commit(key, received);
    return received.size;
  }
  if (!(storage instanceof S3Store)) throw new Error(`no export writer for the ${storage.driver} store`);
  const { client, bucket } = storage;
  const created = await client.send(
    new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: contentType }),
  );
  const uploadId = created.UploadId!;
  try {
    await onUpload(uploadId);
    const parts: { ETag: string; PartNumber: number }[] = [];
    let part = Buffer.allocUnsafe(PART_BYTES);
    let used = 0;
    let size = 0;
    const send = async () => {
      const PartNumber = parts.length + 1;
      const sent = await client.send(
        new UploadPartCommand({
          Bucket: bucket,
          Key: key,
          UploadId: uploadId,
          PartNumber,
          Body: part.subarray(0, used),
        }),
      );
      parts.push({ ETag: sent.ETag!, PartNumber });
      used = 0;
    };
    for await (const chunk of body) {
      size += chunk.byteLength;
      let from = 0;
      while (from < chunk.byteLength) {
        const n = Math.min(PART_BYTES - used, chunk.byteLength - from);
        part.set(chunk.subarray(from, from + n), used);
        used += n;
        from += n;
        if (used === PART_BYTES) await send();
      }
    }
    if (used > 0 || parts.length === 0) await send();
    part = Buffer.alloc(0);
    await complete(storage, key, uploadId, parts, size);
    return size;
  } catch (e) {
    await abortUpload(storage, key, uploadId).catch(() => {});
    throw e;
  }
}

/**
 * CompleteMultipartUpload, which the SDK retries. A retry after an answer that was lost (a reset,
 * a cut body) finds the upload already completed and gone: S3 says NoSuchUpload, s3rver a 500. So
 * a failure is checked against the object: the key is this run's alone (exportObjectKey), so an
 * object there with every byte written is this upload, complete. (Its ETag would not tell more on
 * every store: s3rver's is not S3's MD5 of the parts' MD5s.)
 */
async function complete(
  storage: S3Store,
  key: string,
  uploadId: string,
  parts: { ETag: string; PartNumber: number }[],
  size: number,
): Promise<void> {
  try {
    await storage.client.send(
      new CompleteMultipartUploadCommand({
        Bucket: storage.bucket,
        Key: key,
        UploadId: uploadId,
        MultipartUpload: { Parts: parts },
      }),
    );
  } catch (e) {
    const info = await storage.head(key).catch(() => undefined);
    if (info?.size === size) return;
    throw e;
  }
}

/** Drops what a run left of its file: its multipart upload (if any) and its object. Safe to repeat. */
export async function abortUpload(storage: ObjectStore, key: string, uploadId: string | null): Promise<void> {
  if (uploadId && storage instanceof S3Store) {
    await storage.client
      .send(new AbortMultipartUploadCommand({ Bucket: storage.bucket, Key: key, UploadId: uploadId }))
      .catch((e: { name?: string }) => {
        if (e?.name !== 'NoSuchUpload') throw e;
      });
  }
  await storage.remove(key);
}

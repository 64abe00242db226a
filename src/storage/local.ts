import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { access, mkdir, open, readdir, readFile, rename, rm, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { ObjectChangedError, type ObjectInfo, type ObjectStore, type ReadOptions, type UploadTarget } from './store';
import type { UploadTokens } from './upload-token';

/** S3's single-PUT limit, which the local store enforces too. */
export const MAX_UPLOAD_BYTES = 5 * 1024 ** 3;

export class EntityTooLargeError extends Error {}

/** A body written to a temp file, not yet visible under its key. */
export interface Received {
  tmp: string;
  /** md5 hex of the content, unquoted. */
  md5: string;
  size: number;
}

const WRITE_CHUNK = 1024 * 1024;
/**
 * A body is made durable as it arrives, every this many bytes (fdatasync), not only at its end. The
 * kernel lets an upload's pages sit dirty up to a tenth of the memory (2.4 GB on the 24 GiB bench
 * machine) before it writes them by itself; the one fsync at the end then writes them all at once,
 * and every PostgreSQL commit on the same disk waits behind it.
 */
const SYNC_EVERY = 8 * 1024 * 1024;

/**
 * Objects as files under one directory. Each version of an object is kept by content
 * (`<key>.v/<md5>`) and a small pointer file `<key>` names the current one: a reader that pinned an
 * ETag keeps reading exactly that content even if a later PUT lands, the way S3 If-Match refuses a
 * changed object. Every write goes to a temp file in the same directory and is renamed into place.
 */
export class LocalStore implements ObjectStore {
  readonly driver = 'local' as const;

  constructor(
    readonly dir: string,
    private readonly publicUrl: string,
    readonly tokens: UploadTokens,
  ) {}

  async presignUpload(target: UploadTarget): Promise<string> {
    const token = this.tokens.sign({
      accountId: target.accountId,
      importId: target.importId,
      expiresAt: Math.floor(target.expiresAt.getTime() / 1000),
    });
    return `${this.publicUrl}/uploads/${token}`;
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    try {
      const p = JSON.parse(await readFile(this.path(key), 'utf8')) as { md5: string; size: number; at: string };
      return { size: p.size, etag: `"${p.md5}"`, lastModified: new Date(p.at) };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
  }

  async read(key: string, etag?: string, opts: ReadOptions = {}): Promise<Readable> {
    const md5 = etag ? etag.replaceAll('"', '') : (await this.head(key))?.etag.replaceAll('"', '');
    if (!md5) throw new ObjectChangedError(`object ${key} does not exist`);
    try {
      const fh = await open(join(this.versions(key), md5), 'r');
      // The stream owns the handle: its end or its destroy() closes the file. A stream its reader
      // drops without either keeps the file open until the GC finds the FileHandle, which Bun throws
      // as an uncaughtException (issue 39): every reader destroys the stream on every path.
      return fh.createReadStream({ highWaterMark: opts.chunkBytes, autoClose: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT')
        throw new ObjectChangedError(`object ${key} no longer has ETag ${etag}`, { cause: e });
      throw e;
    }
  }

  async putFile(key: string, path: string): Promise<ObjectInfo> {
    const received = await this.receive(key, createReadStream(path));
    await this.commit(key, received);
    await this.prune(key);
    return { size: received.size, etag: `"${received.md5}"` };
  }

  async remove(key: string): Promise<void> {
    await rm(this.path(key), { force: true });
    await rm(this.versions(key), { recursive: true, force: true });
  }

  /**
   * Streams `body` into a temp file beside the object, hashing as it goes; never buffers more than
   * one write chunk. Throws EntityTooLargeError past `maxBytes` and whatever `check` throws (it runs
   * per chunk, e.g. a deadline); the temp file is deleted on any failure.
   */
  async receive(
    key: string,
    body: AsyncIterable<Uint8Array>,
    maxBytes = MAX_UPLOAD_BYTES,
    check?: () => void,
  ): Promise<Received> {
    const dir = this.versions(key);
    await mkdir(dir, { recursive: true });
    const tmp = join(dir, `.tmp-${Date.now()}-${randomBytes(6).toString('hex')}`);
    const fh = await open(tmp, 'wx', 0o600);
    const hash = createHash('md5');
    let size = 0;
    try {
      let pending: Uint8Array[] = [];
      let pendingBytes = 0;
      let unsynced = 0;
      for await (const chunk of body) {
        size += chunk.byteLength;
        if (size > maxBytes) throw new EntityTooLargeError(`body exceeds ${maxBytes} bytes`);
        check?.();
        hash.update(chunk);
        pending.push(chunk);
        pendingBytes += chunk.byteLength;
        if (pendingBytes >= WRITE_CHUNK) {
          await writeAll(fh, pending);
          unsynced += pendingBytes;
          pending = [];
          pendingBytes = 0;
          if (unsynced >= SYNC_EVERY) {
            await fh.datasync();
            unsynced = 0;
          }
        }
      }
      await writeAll(fh, pending);
      await fh.sync();
    } catch (e) {
      await fh.close().catch(() => {});
      await unlink(tmp).catch(() => {});
      throw e;
    }
    await fh.close();
    return { tmp, md5: hash.digest('hex'), size };
  }

  /**
   * Makes a received body the object's current version: rename into place, then the pointer.
   * Idempotent: a commit whose transaction was lost after the rename (src/uploads/complete.ts, sent
   * again) finds its version already in place, by content, and writes the pointer again.
   */
  async commit(key: string, r: Received): Promise<void> {
    const dir = this.versions(key);
    const version = join(dir, r.md5);
    await rename(r.tmp, version).catch(async (e: unknown) => {
      if ((e as { code?: unknown }).code !== 'ENOENT') throw e;
      await access(version).catch(() => Promise.reject(e));
    });
    const pointerTmp = join(dir, `.tmp-pointer-${randomBytes(6).toString('hex')}`);
    const fh = await open(pointerTmp, 'wx', 0o600);
    try {
      await fh.writeFile(JSON.stringify({ md5: r.md5, size: r.size, at: new Date().toISOString() }));
      await fh.sync();
    } catch (e) {
      // A full disk fails the pointer's write: the object stays as it was (or absent), and neither
      // the temp file nor the version renamed above is left behind, unless it is the current one.
      await fh.close().catch(() => {});
      await unlink(pointerTmp).catch(() => {});
      const current = await this.head(key).catch(() => undefined);
      if (current?.etag !== `"${r.md5}"`) await unlink(version).catch(() => {});
      throw e;
    }
    await fh.close();
    await rename(pointerTmp, this.path(key));
    await syncDir(dir);
    await syncDir(dirname(this.path(key)));
  }

  async discard(r: Received): Promise<void> {
    await unlink(r.tmp).catch(() => {});
  }

  /** Deletes superseded versions; keeps the current one and in-flight temp files. */
  async prune(key: string): Promise<void> {
    const current = (await this.head(key))?.etag.replaceAll('"', '');
    const names = await readdir(this.versions(key)).catch(() => [] as string[]);
    await Promise.all(
      names
        .filter((n) => n !== current && !n.startsWith('.tmp-'))
        .map((n) => unlink(join(this.versions(key), n)).catch(() => {})),
    );
  }

  private path(key: string): string {
    const p = resolve(this.dir, key);
    // Keys are built by the service, but a key must never escape the store directory.
    if (!p.startsWith(resolve(this.dir) + sep)) throw new Error(`object key ${key} leaves the store directory`);
    return p;
  }

  private versions(key: string): string {
    return `${this.path(key)}.v`;
  }
}

async function writeAll(fh: FileHandle, chunks: Uint8Array[]): Promise<void> {
  const buf = Buffer.concat(chunks);
  // write() may write less than asked; loop until the whole chunk is on disk.
  for (let off = 0; off < buf.length;) off += (await fh.write(buf, off)).bytesWritten;
}

async function syncDir(dir: string): Promise<void> {
  const d = await open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}

// The s3 driver against an S3-protocol server (s3rver) started here (DESIGN: object store, tests
// exercise both drivers). The client PUTs to the presigned URL exactly as an API client would.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
// @ts-expect-error s3rver ships no type declarations
import S3rver from 's3rver';
import { loadConfig } from '../../src/config';
import { createStore, ObjectChangedError, S3Store } from '../../src/storage';

const BUCKET = 'imports';
let dir: string;
let server: S3rver;
let store: S3Store;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 's3rver-'));
  server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: join(dir, 's3'),
    configureBuckets: [{ name: BUCKET, configs: [] }],
  });
  const { port } = (await server.run()) as unknown as { port: number };
  const config = loadConfig({
    DATA_DIR: dir,
    S3_BUCKET: BUCKET,
    S3_ENDPOINT: `http://127.0.0.1:${port}`,
    S3_ACCESS_KEY_ID: 'S3RVER',
    S3_SECRET_ACCESS_KEY: 'S3RVER',
  });
  store = (await createStore(config)) as S3Store;
});
afterAll(async () => {
  store?.client.destroy();
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

const md5 = (s: string) => createHash('md5').update(s).digest('hex');

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks).toString('utf8');
}

describe('s3 driver', () => {
  test('createStore picks s3 when a bucket is configured', () => {
    expect(store).toBeInstanceOf(S3Store);
    expect(store.driver).toBe('s3');
  });

  test('presigned PUT with fetch (no Authorization, no checksum), then head, read with the ETag, remove', async () => {
    const key = 'contact-imports/acct/one.csv';
    const csv = 'Email\na@example.com\n';
    const url = await store.presignUpload({
      key,
      accountId: 'acct',
      importId: 'one',
      expiresAt: new Date(Date.now() + 3600_000),
    });
    expect(url).toContain('X-Amz-Signature=');
    expect(url).toContain('X-Amz-Expires=3600');
    expect(url).not.toContain('x-amz-checksum');
    expect(url).not.toContain('x-amz-sdk-checksum');
    const res = await fetch(url, { method: 'PUT', body: csv, headers: { 'content-type': 'text/csv' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe(`"${md5(csv)}"`);

    const info = await store.head(key);
    expect(info).toMatchObject({ size: csv.length, etag: `"${md5(csv)}"` });
    expect(info!.lastModified).toBeInstanceOf(Date);
    expect(await text(await store.read(key, info!.etag))).toBe(csv);
    expect(await text(await store.read(key))).toBe(csv);

    await store.remove(key);
    expect(await store.head(key)).toBeUndefined();
    await expect(store.read(key, info!.etag)).rejects.toBeInstanceOf(ObjectChangedError);
    await store.remove(key); // removing what is gone is fine
  });

  test('head of an object that never arrived is undefined', async () => {
    expect(await store.head('contact-imports/acct/missing.csv')).toBeUndefined();
  });

  test('putFile stores a local file (the admin import command)', async () => {
    const path = join(dir, 'manual.csv');
    await writeFile(path, 'Email\nm@example.com\n');
    const info = await store.putFile('contact-imports/acct/manual.csv', path);
    expect(info.etag).toBe(`"${md5('Email\nm@example.com\n')}"`);
    expect(await text(await store.read('contact-imports/acct/manual.csv', info.etag))).toBe('Email\nm@example.com\n');
  });
});

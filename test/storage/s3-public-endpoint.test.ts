// S3_PUBLIC_ENDPOINT: the processes reach the store at one address, clients at another (a compose
// network and its published port, docs/container.md). Here 127.0.0.1 stands for the inner address
// and localhost for the published one; both reach the same s3rver. (A real store refuses a link at a
// host other than the one it was signed for; s3rver does not check the host, so that is not tested.)
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// @ts-expect-error s3rver ships no type declarations
import S3rver from 's3rver';
import { loadConfig } from '../../src/config';
import { DownloadLinks } from '../../src/exports/download';
import { createStore, S3Store } from '../../src/storage';

const BUCKET = 'imports';
let dir: string;
let server: S3rver;
let port: number;
const stores: S3Store[] = [];

async function s3Store(publicEndpoint?: string) {
  const config = loadConfig({
    DATA_DIR: dir,
    S3_BUCKET: BUCKET,
    S3_ENDPOINT: `http://127.0.0.1:${port}`,
    ...(publicEndpoint && { S3_PUBLIC_ENDPOINT: publicEndpoint }),
    S3_ACCESS_KEY_ID: 'S3RVER',
    S3_SECRET_ACCESS_KEY: 'S3RVER',
  });
  const store = (await createStore(config)) as S3Store;
  stores.push(store);
  return { config, store };
}

const expiresAt = () => new Date(Date.now() + 60_000);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 's3-public-'));
  server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: join(dir, 's3'),
    configureBuckets: [{ name: BUCKET, configs: [] }],
  });
  ({ port } = (await server.run()) as unknown as { port: number });
});
afterAll(async () => {
  for (const s of stores) {
    s.client.destroy();
    s.signer.destroy();
  }
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('S3_PUBLIC_ENDPOINT', () => {
  test('upload links are signed for the public endpoint; the store reads through the inner one', async () => {
    const { store } = await s3Store(`http://localhost:${port}`);
    const key = 'contact-imports/acct/public.csv';
    const url = await store.presignUpload({ key, accountId: 'acct', importId: 'public', expiresAt: expiresAt() });
    expect(url).toStartWith(`http://localhost:${port}/${BUCKET}/${key}?`);
    const put = await fetch(url, { method: 'PUT', body: 'Email\na@example.com\n' });
    expect(put.status).toBe(200);
    expect((await store.head(key))?.size).toBe(20);
  });

  test('without it, links are signed for S3_ENDPOINT', async () => {
    const { store } = await s3Store();
    expect(store.signer).toBe(store.client);
    const url = await store.presignUpload({ key: 'k.csv', accountId: 'a', importId: 'k', expiresAt: expiresAt() });
    expect(url).toStartWith(`http://127.0.0.1:${port}/${BUCKET}/k.csv?`);
  });

  test("an export's download link is signed for the public endpoint and serves the file there", async () => {
    const { config, store } = await s3Store(`http://localhost:${port}`);
    const key = 'contact-exports/acct/exp/1.csv';
    const up = await store.presignUpload({ key, accountId: 'acct', importId: 'exp', expiresAt: expiresAt() });
    expect((await fetch(up, { method: 'PUT', body: 'Email\nb@example.com\n' })).status).toBe(200);
    const grant = {
      accountId: '00000000-0000-4000-8000-000000000001',
      exportId: '00000000-0000-4000-8000-000000000002',
      expiresAt: Math.floor(Date.now() / 1000) + 60,
    };
    const link = await new DownloadLinks(config, store).link(grant, key, false);
    expect(link).toStartWith(`http://localhost:${port}/${BUCKET}/${key}?`);
    const res = await fetch(link!);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('Email\nb@example.com\n');
  });
});

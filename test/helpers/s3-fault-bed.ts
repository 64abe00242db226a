/**
 * What the object-store fault tests share: s3rver in a temp directory, the fault proxy in front of
 * it, the env that points a process's `s3` driver at the proxy (short timeouts, so a stall costs
 * seconds), and a store on each side: `store` through the proxy, `direct` past it (to stage and to
 * check objects without meeting a fault).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// @ts-expect-error s3rver ships no type declarations
import S3rver from 's3rver';
import { loadConfig } from '../../src/config';
import { S3Store } from '../../src/storage/s3';
import { startS3FaultProxy, type S3FaultProxy } from './s3-fault-proxy';

export interface S3FaultBed {
  proxy: S3FaultProxy;
  /** STORAGE_DRIVER … S3_MAX_ATTEMPTS for a process whose store is behind the proxy. */
  env: Record<string, string>;
  store: S3Store;
  direct: S3Store;
  stop(): Promise<void>;
}

export async function s3FaultBed(opts: { requestTimeoutMs: number; maxAttempts: number }): Promise<S3FaultBed> {
  const dir = await mkdtemp(join(tmpdir(), 's3-faults-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: dir,
    configureBuckets: [{ name: 'imports', configs: [] }],
  });
  const { port } = (await server.run()) as unknown as { port: number };
  const proxy = await startS3FaultProxy(`http://127.0.0.1:${port}`);
  const envFor = (endpoint: string) => ({
    STORAGE_DRIVER: 's3',
    S3_BUCKET: 'imports',
    S3_ENDPOINT: endpoint,
    S3_ACCESS_KEY_ID: 'S3RVER',
    S3_SECRET_ACCESS_KEY: 'S3RVER',
    S3_FORCE_PATH_STYLE: 'true',
    S3_REQUEST_TIMEOUT_MS: String(opts.requestTimeoutMs),
    S3_MAX_ATTEMPTS: String(opts.maxAttempts),
  });
  const storeAt = (endpoint: string) => {
    const s = loadConfig({ ...envFor(endpoint), DATA_DIR: dir }).storage;
    if (s.driver !== 's3') throw new Error('expected the s3 driver');
    return new S3Store(s);
  };
  const env = envFor(proxy.url);
  return {
    proxy,
    env,
    store: storeAt(proxy.url),
    direct: storeAt(`http://127.0.0.1:${port}`),
    async stop() {
      await proxy.stop();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

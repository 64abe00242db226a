/**
 * The API on a private database with the local object store in a temp dir, for tests that walk an
 * import through POST /v1/contact-imports, the upload link and runImport themselves. The queue only
 * records the ids it is handed (`enqueued`): those tests run the job in-process, where they can
 * look at every step; the queue's own behaviour is tested with BullMQ on Redis elsewhere.
 */
import { afterAll, beforeAll } from 'bun:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config';
import type { ImportQueue } from '../../src/imports/queue';
import { createStore } from '../../src/storage';
import type { LocalStore } from '../../src/storage/local';
import { uploadHandler } from '../../src/uploads';
import { testApp, type TestApp } from './app';

export interface UploadBed {
  t: TestApp;
  dir: string;
  store: LocalStore;
  /** the upload link's handler, as the API mounts it */
  put: (req: Request) => Promise<Response>;
  /** the queue the app was given: it records the ids it is handed (`enqueued`), in order */
  queue: ImportQueue;
  enqueued: string[];
}

/** Made before the file's tests (as `name-XXXXXX` in the temp dir), removed after them. */
export function uploadBed(name: string): UploadBed {
  const bed = { enqueued: [] as string[] } as UploadBed;
  const queue: ImportQueue = {
    enqueueImport: async (_account, id) => void bed.enqueued.push(id),
    ensureImport: async () => 'live',
    ping: async () => 'PONG',
    close: async () => {},
  };
  bed.queue = queue;
  beforeAll(async () => {
    bed.dir = await mkdtemp(join(tmpdir(), `${name}-`));
    const env = { DATA_DIR: bed.dir, STORAGE_DIR: join(bed.dir, 'objects'), PUBLIC_URL: 'http://api.test' };
    bed.store = (await createStore(loadConfig(env))) as LocalStore;
    bed.t = await testApp({ storage: bed.store, queue }, env);
    bed.put = uploadHandler(bed.t.deps);
  });
  afterAll(async () => {
    await bed.t?.close();
    await rm(bed.dir, { recursive: true, force: true });
  });
  return bed;
}

import { join } from 'node:path';
import type { Config } from '../config';
import { LocalStore } from './local';
import { S3Store } from './s3';
import type { ObjectStore } from './store';
import { loadUploadSecret, UploadTokens } from './upload-token';

export type { ObjectInfo, ObjectStore, UploadTarget } from './store';
export { ObjectChangedError } from './store';
export { LocalStore, MAX_UPLOAD_BYTES } from './local';
export { S3Store } from './s3';

/** The object store the config names: S3-compatible, or the embedded local one. */
export async function createStore(config: Config): Promise<ObjectStore> {
  const s = config.storage;
  if (s.driver === 's3') return new S3Store(s);
  const secret = await loadUploadSecret(s.uploadSecret, join(config.dataDir, 'upload-secret'));
  return new LocalStore(s.dir, config.publicUrl, new UploadTokens(secret));
}

/** Where a contact import's file lives; one object per import, keyed by account first. */
export function importObjectKey(accountId: string, importId: string): string {
  return `contact-imports/${accountId}/${importId}.csv`;
}

/** Where an import's rejected-rows report is kept, beside its file (worker/import/report.ts). */
export function rejectedRowsObjectKey(accountId: string, importId: string): string {
  return `contact-imports/${accountId}/${importId}.rejected-rows.csv`;
}

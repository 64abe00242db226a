import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type Config } from '../../src/config';
import type { Sql } from '../../src/db';
import { importObjectKey } from '../../src/storage';
import { LocalStore } from '../../src/storage/local';
import type { ObjectStore } from '../../src/storage/store';
import { UploadTokens } from '../../src/storage/upload-token';

/** The real local object store over a fresh temp directory. */
export async function tempStore(): Promise<{ store: LocalStore; dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'import-store-'));
  const store = new LocalStore(dir, 'http://localhost:0', new UploadTokens(randomBytes(32)));
  return { store, dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** A config for pipeline tests: only the batch size matters. */
export function testConfig(importBatchSize: number, dataDir = tmpdir()): Config {
  return loadConfig({ IMPORT_BATCH_SIZE: String(importBatchSize), DATA_DIR: dataDir, STORAGE_DRIVER: 'local' });
}

export interface ImportOptions {
  columns: string[];
  strategy?: 'overwrite' | 'keep' | 'skip';
  overwriteBrands?: boolean;
  restoreDisabled?: boolean;
  publishEvents?: boolean;
  brandIds?: string[];
  method?: 'api' | 'manual';
}

/**
 * An import in status `uploaded` with `content` (or the file at `path`) stored as its object, as if
 * the upload link had received it. `columns` are canonical schema names.
 */
export async function stageImport(
  sql: Sql,
  store: Pick<ObjectStore, 'putFile'>,
  accountId: string,
  content: string | Uint8Array | { path: string },
  o: ImportOptions,
): Promise<string> {
  const id = crypto.randomUUID();
  const key = importObjectKey(accountId, id);
  const given = typeof content === 'object' && 'path' in content ? content.path : undefined;
  const file = given ?? join(tmpdir(), `import-${id}.csv`);
  if (given === undefined) await writeFile(file, content as string | Uint8Array);
  try {
    const info = await store.putFile(key, file);
    await sql`
      insert into contact_imports (
        account_id, id, status, method, columns, duplicate_contact_strategy, overwrite_brands, restore_disabled,
        publish_events, brand_ids, updated_count, skipped_count, object_key, object_etag, object_size, uploaded_at)
      values (
        ${accountId}, ${id}, 'uploaded', ${o.method ?? 'api'}, ${sql.array(o.columns)}, ${o.strategy ?? 'overwrite'},
        ${o.overwriteBrands ?? false}, ${o.restoreDisabled ?? false}, ${o.publishEvents ?? true},
        ${sql.array(o.brandIds ?? [])}::uuid[], 0, 0, ${key}, ${info.etag}, ${info.size}, now())`;
  } finally {
    if (given === undefined) await rm(file, { force: true });
  }
  return id;
}

/** The import row with the fields tests look at, counters as numbers. */
export async function importRow(sql: Sql, accountId: string, id: string) {
  const [row] = await sql<
    {
      status: string;
      phase: string | null;
      rowCount: number | null;
      addedCount: number;
      updatedCount: number | null;
      skippedCount: number | null;
      malformedCount: number;
      duplicateInFileCount: number | null;
      percentComplete: number | null;
      failureReason: string | null;
      completedAt: Date | null;
      checkpoint: number;
    }[]
  >`
    select status, phase, row_count as "rowCount", added_count as "addedCount", updated_count as "updatedCount",
           skipped_count as "skippedCount", malformed_count as "malformedCount",
           duplicate_in_file_count as "duplicateInFileCount", percent_complete as "percentComplete",
           failure_reason as "failureReason", completed_at as "completedAt", checkpoint
    from contact_imports where account_id = ${accountId} and id = ${id}`;
  return row!;
}

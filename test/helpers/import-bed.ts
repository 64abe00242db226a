import { afterAll, beforeAll } from 'bun:test';
import { createTestDatabase, type TestDatabase } from './db';
import { tempStore } from './file-store';

export interface ImportBed {
  /** The file's own database, cloned from the migrated template. */
  db: TestDatabase;
  /** The real local object store over a fresh temp directory. */
  files: Awaited<ReturnType<typeof tempStore>>;
}

/**
 * What every import test file sets up: its own database and object store, made before its tests
 * and removed after them. Call it at the top of the file, before other hooks (hooks run in the
 * order they are registered), and read `bed.db` / `bed.files` inside tests and hooks.
 */
export function importBed(): ImportBed {
  const bed = {} as ImportBed;
  beforeAll(async () => {
    bed.db = await createTestDatabase();
    bed.files = await tempStore();
  });
  afterAll(async () => {
    await bed.db?.drop();
    await bed.files?.remove();
  });
  return bed;
}

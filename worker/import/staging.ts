import type { Sql } from '../../src/db';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Names of one import's staging tables, both UNLOGGED. */
export interface StagingTables {
  /** What the read phase COPYs validated rows into (rowsTableDdl). */
  rows: string;
  /** What the dedupe phase writes: `seq` (1…rowCount, email_md5 order) and the staged columns but row_no. */
  merge: string;
}

/**
 * The per-import staging tables. Names are built from the import id alone (checked to be a
 * uuid, so only hex digits reach the SQL text), which makes every step that creates or drops them
 * idempotent across restarts and workers.
 */
export function stagingTables(importId: string): StagingTables {
  if (!UUID.test(importId)) throw new Error(`import id ${importId} is not a uuid`);
  const hex = importId.replaceAll('-', '').toLowerCase();
  return { rows: `import_rows_${hex}`, merge: `import_merge_${hex}` };
}

/**
 * DDL of the table the read phase COPYs validated rows into. UNLOGGED: it is rebuilt from the file
 * after any crash anyway, so WAL for it would be pure cost. `row_no` is the data row's position in
 * the file; the last row per email wins at dedupe. `attribute_count` is how many attributes the row
 * sent (keys of `attributes`): a row that sends every attribute of the schema replaces a contact's
 * attributes whole under `overwrite`, and merge-batch.sql skips the jsonb merge for it.
 */
export function rowsTableDdl(table: string): string {
  return `
    create unlogged table if not exists ${table} (
      row_no     bigint not null,
      email_md5  uuid   not null,
      email      text   not null,
      attributes jsonb  not null,
      brand_ids  uuid[] not null,
      attribute_count int2 not null
    )`;
}

/** Drops both staging tables; safe to run any number of times, on any connection. */
export async function dropStaging(sql: Sql, importId: string): Promise<void> {
  const t = stagingTables(importId);
  await sql.unsafe(`drop table if exists ${t.rows}, ${t.merge}`);
}

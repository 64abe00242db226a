import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Sql } from './db';

const MIGRATIONS_DIR = join(import.meta.dir, '..', 'sql', 'migrations');
// Any fixed number works; it only has to be the same in every replica.
const MIGRATION_LOCK = 72_810_001;

export class MigrationError extends Error {}

/**
 * Applies the forward-only files of sql/migrations in name order, each in its own transaction, under
 * a session advisory lock so that replicas starting at once apply each file exactly once. A file
 * that changed after it was applied is refused (checksums are recorded).
 */
export async function migrate(sql: Sql, log: (msg: string) => void = () => {}): Promise<string[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
  const applied: string[] = [];
  await sql.reserve().then(async (conn) => {
    try {
      await conn`select pg_advisory_lock(${MIGRATION_LOCK})`;
      await conn`
        create table if not exists schema_migrations (
          version    text primary key,
          checksum   text not null,
          applied_at timestamptz not null default now()
        )`;
      const done = new Map(
        (await conn<{ version: string; checksum: string }[]>`select version, checksum from schema_migrations`).map(
          (r) => [r.version, r.checksum],
        ),
      );
      // A database migrated by a version with other files (before the set was squashed, or a newer
      // version) would get tables created over its own: refuse instead of guessing.
      const unknown = [...done.keys()].filter((version) => !files.includes(version));
      if (unknown.length) {
        throw new MigrationError(
          `The database has migrations this version does not have (${unknown.join(', ')}): it was ` +
            'migrated by another version of the service. Use a fresh database (the unreleased migrations ' +
            'were squashed into one set).',
        );
      }
      for (const file of files) {
        const text = await Bun.file(join(MIGRATIONS_DIR, file)).text();
        const checksum = createHash('sha256').update(text).digest('hex');
        const known = done.get(file);
        if (known !== undefined) {
          if (known !== checksum)
            throw new MigrationError(`Migration ${file} changed after it was applied; add a new migration instead.`);
          continue;
        }
        // A reserved connection has no begin(): the transaction is spelled out on it.
        await conn`begin`;
        try {
          await conn.unsafe(text);
          await conn`insert into schema_migrations (version, checksum) values (${file}, ${checksum})`;
          await conn`commit`;
        } catch (e) {
          await conn`rollback`.catch(() => {});
          throw e;
        }
        applied.push(file);
        log(`applied migration ${file}`);
      }
    } finally {
      await conn`select pg_advisory_unlock(${MIGRATION_LOCK})`.catch(() => {});
      conn.release();
    }
  });
  return applied;
}

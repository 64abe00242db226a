import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { onCitusWorkerNode, type Sql } from './db';

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
  const files = await migrationFiles();
  // On a Citus worker the record of migrations is the coordinator's, and so is their DDL.
  if (await onCitusWorkerNode(sql)) return checkedThroughCoordinator(sql, files);
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
      for (const file of pendingMigrations(done, files)) {
        const { text, checksum } = files.get(file)!;
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

type MigrationFiles = ReadonlyMap<string, { text: string; checksum: string }>;

/** The files of sql/migrations in name order, with the checksums recorded when they are applied. */
async function migrationFiles(): Promise<MigrationFiles> {
  const names = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
  const files = new Map<string, { text: string; checksum: string }>();
  for (const name of names) {
    const text = await Bun.file(join(MIGRATIONS_DIR, name)).text();
    files.set(name, { text, checksum: createHash('sha256').update(text).digest('hex') });
  }
  return files;
}

/**
 * The files not applied yet, in order; throws when the database was migrated by another version
 * (a file it has that this version lacks, or one that changed after it was applied).
 */
function pendingMigrations(done: ReadonlyMap<string, string>, files: MigrationFiles): string[] {
  // A database migrated by a version with other files (before the set was squashed, or a newer
  // version) would get tables created over its own: refuse instead of guessing.
  const unknown = [...done.keys()].filter((version) => !files.has(version));
  if (unknown.length) {
    throw new MigrationError(
      `The database has migrations this version does not have (${unknown.join(', ')}): it was ` +
        'migrated by another version of the service. Use a fresh database (the unreleased migrations ' +
        'were squashed into one set).',
    );
  }
  const pending: string[] = [];
  for (const [file, { checksum }] of files) {
    const known = done.get(file);
    if (known === undefined) pending.push(file);
    else if (known !== checksum)
      throw new MigrationError(`Migration ${file} changed after it was applied; add a new migration instead.`);
  }
  return pending;
}

/**
 * On a Citus worker nothing is applied: a worker refuses DDL of distributed tables, and
 * schema_migrations is the coordinator's own table. The coordinator's record is read instead
 * (Citus runs the query there) and must hold every file of this version, unchanged.
 */
async function checkedThroughCoordinator(sql: Sql, files: MigrationFiles): Promise<string[]> {
  const [row] = await sql<{ result: string }[]>`
    select result from run_command_on_coordinator(
      $$select coalesce(json_agg(json_build_array(version, checksum)), '[]') from schema_migrations$$)`;
  const pending = pendingMigrations(new Map(JSON.parse(row!.result) as [string, string][]), files);
  if (pending.length)
    throw new MigrationError(
      `This database is a worker of a Citus cluster, where migrations are applied through the coordinator, ` +
        `and the coordinator lacks ${pending.join(', ')}: migrate through the coordinator first ` +
        '(`npm run migrate` with DATABASE_URL pointing at it, or one replica started there).',
    );
  return [];
}

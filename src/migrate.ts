import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { onCitusWorkerNode, type Sql } from './db';

const MIGRATIONS_DIR = join(import.meta.dir, '..', 'sql', 'migrations');
// Any fixed number works; it only has to be the same in every replica.
const MIGRATION_LOCK = 72_810_001;

export class MigrationError extends Error {}

/**
 * Comment lines edited after their file was applied, each with the text it had. A database records
 * the checksum of each file it applies and refuses a file whose text changed since; these edits
 * (a measurement cited by its finding's file in bench/findings/, a path that moved: issue 55)
 * change no statement, and a database migrated before them recorded the checksum of the text with
 * these lines put back, so that checksum is accepted too. The record itself is left as it is: a
 * replica of the former version, started beside this one, still finds the checksum it knows.
 * Only whole comment lines may be listed (`--` first, before and after the edit, one line for one
 * line); anything else refuses to migrate. A changed statement still needs a new migration.
 */
const EDITED_COMMENT_LINES: Readonly<Record<string, readonly { line: number; was: string }[]>> = {
  '0008_contact_write_ok.sql': [
    {
      line: 7,
      was: '-- them: 5 ms of coordinator CPU per create and a p99 of 2 s under 64 connections (bench/README.md,',
    },
    { line: 8, was: '-- session 12), and a cost that grew with the number of workers.' },
  ],
  '0009_events_lz4.sql': [
    { line: 7, was: "-- 1.6 % of PostgreSQL's samples during the merge of 25M rows (bench/README.md, session 14)." },
  ],
  '0010_write_guard_one_frame.sql': [
    { line: 2, was: '-- PostgreSQL it is ONE PL/pgSQL frame with no catalog lookup (issue 35 item 5, bench/README.md' },
    { line: 3, was: "-- session 20). From here on this file is the home of both functions' bodies." },
    {
      line: 23,
      was: '  -- instructions a call (valgrind, bench/README.md session 20). The check stays a query of its own.',
    },
  ],
  '0016_account_locks.sql': [
    {
      line: 1,
      was: "-- Advisory locks of an account's resources (src/locks.ts) taken where the account's shards are.",
    },
  ],
  '0017_account_node_fast_path.sql': [
    { line: 2, was: '-- their checks in the two functions below (issue 40 item 2, bench/README.md session 30).' },
  ],
  '0018_static_write_checks.sql': [{ line: 2, was: '-- bench/README.md session 31).' }],
};

/**
 * Applies the forward-only files of sql/migrations in name order, each in its own transaction, under
 * a session advisory lock so that replicas starting at once apply each file exactly once. A file
 * that changed after it was applied is refused (checksums are recorded). `dir` is for tests.
 */
export async function migrate(
  sql: Sql,
  log: (msg: string) => void = () => {},
  dir: string = MIGRATIONS_DIR,
): Promise<string[]> {
  const files = await migrationFiles(dir);
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

type MigrationFiles = ReadonlyMap<string, { text: string; checksum: string; accepted: readonly string[] }>;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * The files of sql/migrations in name order, with the checksum recorded when they are applied and
 * every checksum a database may hold for them (this text's, and the text's before EDITED_COMMENT_LINES).
 */
async function migrationFiles(dir: string): Promise<MigrationFiles> {
  const names = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const files = new Map<string, { text: string; checksum: string; accepted: readonly string[] }>();
  for (const name of names) {
    const text = await Bun.file(join(dir, name)).text();
    const checksum = sha256(text);
    const former = textBeforeCommentEdits(name, text);
    files.set(name, { text, checksum, accepted: former === undefined ? [checksum] : [checksum, sha256(former)] });
  }
  return files;
}

/** `text` with the comment lines EDITED_COMMENT_LINES lists for `name` put back; undefined when none are. */
export function textBeforeCommentEdits(name: string, text: string): string | undefined {
  const edits = EDITED_COMMENT_LINES[name];
  if (!edits) return undefined;
  const lines = text.split('\n');
  const comment = (line: string | undefined) => line !== undefined && line.trimStart().startsWith('--');
  for (const { line, was } of edits) {
    if (!comment(lines[line - 1]) || !comment(was) || was.includes('\n'))
      throw new MigrationError(
        `Migration ${name}: line ${line} is listed as an edited comment, but it is not one (now or before).`,
      );
    lines[line - 1] = was;
  }
  return lines.join('\n');
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
  for (const [file, { accepted }] of files) {
    const known = done.get(file);
    if (known === undefined) pending.push(file);
    else if (!accepted.includes(known))
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

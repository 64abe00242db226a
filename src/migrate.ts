import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { onCitusWorkerNode, type Sql } from './db';

const MIGRATIONS_DIR = join(import.meta.dir, '..', 'sql', 'migrations');
// Any fixed number works; it only has to be the same in every replica.
const MIGRATION_LOCK = 72_810_001;

export class MigrationError extends Error {}

/**
 * Files whose comments were edited after they were applied (measurements cited by their finding's
 * file in bench/findings/, paths and README sections that moved to docs/: issue 55), each with the
 * checksum that a database migrated before the edit recorded (`was`) and the checksum of that
 * former text's statements: the text without its whole comment lines (`statements`, see
 * statementsOf). A database refuses a file
 * whose text changed since it was applied; `was` is accepted as well, but only while this file's
 * statements still hash to `statements`: a comment may change, a statement never (that takes a new
 * migration). The record is left as it is, so a replica of the former version, started beside this
 * one, still finds the checksum it knows. The former texts are in git at a7f2337
 * (test/migrate.test.ts migrates a database from them).
 */
const COMMENTS_EDITED: Readonly<Record<string, { was: string; statements: string }>> = {
  '0003_contact_write_lock.sql': {
    was: 'da535be92cd0e27a3281489c8f3d88e724a3871f6886025c4c455e0f04392c7f',
    statements: '34a21da4e9e88dbed2ab5d2bd8d50b78d23ff5db5fe2e34d7ff719669cbbe80d',
  },
  '0007_citus.sql': {
    was: '1974f37ed1b5427d1784d010fea0ab2538b35c13c6b68077f9232dea218084a0',
    statements: 'ea51a6f48fb7088d96f47a5f020ff3df4066e64a43a228dab614c948a0315291',
  },
  '0008_contact_write_ok.sql': {
    was: '495a876b051a86e4e5c6be39168455936a34a72914b5a4ab024329f23deee412',
    statements: '08e246fab90f3b77d1e04f310540f1a4836787db6157d34e09c33e4613cef1c1',
  },
  '0009_events_lz4.sql': {
    was: 'c378d06bc1a0d81dc108ce8e533aaa1fefdafeef73675357f8e44c30b7403c21',
    statements: 'eef7a7bb80e8de9ab80902362bc64150e393206da0d580cc43fa0c894ee8fe0e',
  },
  '0010_write_guard_one_frame.sql': {
    was: '8ee5ae1f3e9f9aa780636a78d8d1b1c63b7c7696eadc7aa9cad65ddebe3bf0e7',
    statements: '513c5057e9519ecf9e54d61e50268ddf28b8d730949962f3c5ac9df71d8b934c',
  },
  '0011_event_feed.sql': {
    was: '980254309afb32489b68cb180b52147293a0b39bf8582ad177487e71c49fdce6',
    statements: 'c588d56a2e3bf8cddafd2fd44ea52d46cf4b86b659c4da3677efd256d2a5e708',
  },
  '0013_contact_exports.sql': {
    was: '87f68ba0d84b7f922983661fe89f4fd0a708c180738cb67e8b4e8b687a7ee2cd',
    statements: '0405ef381f517a3632674ace2b10378b2bbaf245ceb4c6fd6c630c589f54b502',
  },
  '0014_rate_limits.sql': {
    was: 'bd50588ea1c2a433c941dbe2318848053c3aa0743ea3700f9d5beb4b4d997e8a',
    statements: '1766065e63f593b82482b4deed514f974a22a3009bae509de3b1ced5a894a0b8',
  },
  '0016_account_locks.sql': {
    was: 'a57589a9e98c10b8b37aad1155663ccf3bc674f6c191e34c01c9ef9511f75d5b',
    statements: '4fb5aeff34e19c3548482fa14db65edec9cd18ad8d8c68719247a2ccb62aa78c',
  },
  '0017_account_node_fast_path.sql': {
    was: '84bdd7f66e2e332ac68fa235e65b8d31374d744f0ae51ad3c5fa76cc016c366b',
    statements: 'c99a9bcaee9452d386f321572c4d2bad1cd0e4bf985a964eac6072a7334a0e5b',
  },
  '0018_static_write_checks.sql': {
    was: '443aa83b91179de04280390a7f0db1c917a8ef19a43293583251ae6c9b888e8d',
    statements: '14771165b86963bce182bdf30587021b75a80daeeb6a54b840a4153272860979',
  },
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
 * every checksum a database may hold for them (this text's, and the former one of COMMENTS_EDITED
 * while the statements are unchanged).
 */
async function migrationFiles(dir: string): Promise<MigrationFiles> {
  const names = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const files = new Map<string, { text: string; checksum: string; accepted: readonly string[] }>();
  for (const name of names) {
    const text = await Bun.file(join(dir, name)).text();
    const checksum = sha256(text);
    const edited = COMMENTS_EDITED[name];
    const former = edited && sha256(statementsOf(text)) === edited.statements ? [edited.was] : [];
    files.set(name, { text, checksum, accepted: [checksum, ...former] });
  }
  return files;
}

/** A migration's text without its whole comment lines (`--` first): what runs, as far as an edit goes. */
export function statementsOf(text: string): string {
  return text
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n');
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

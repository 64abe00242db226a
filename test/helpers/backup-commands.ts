/**
 * The backup and restore commands of docs/backups.md, exactly as the page gives them, run with the
 * PostgreSQL server's own client binaries (the major version of the server, 15 here: a pg_dump
 * older than its server refuses to dump, and pg_restore reads only archives of its version or
 * older). The clients run as the calling user: they talk to the server over TCP, and the dump file
 * is the caller's.
 */
import { join } from 'node:path';
import { findBinDir } from '../../src/embedded/postgres';

/** `pg_dump`: one consistent snapshot, custom format, unlogged tables (the imports' staging) as empty tables. */
export const dumpArgs = (url: string, file: string) => [
  'pg_dump',
  '--format=custom',
  '--no-unlogged-table-data',
  `--file=${file}`,
  `--dbname=${url}`,
];

/** `pg_restore` into an empty database; the first error stops it (a half restore is worse than none). */
export const restoreArgs = (url: string, file: string) => [
  'pg_restore',
  '--exit-on-error',
  '--no-owner',
  `--dbname=${url}`,
  file,
];

/** Planner statistics are not in a dump: gather them before the service takes traffic. */
export const analyzeArgs = (url: string) => ['vacuumdb', '--analyze-only', `--dbname=${url}`];

/**
 * Moves the events' set ids on by 10^12 after a restore: sets written after the backup point, lost
 * with the data, had ids the restored sequence would give out again, and a feed consumer that
 * dedupes on event ids could then drop a new event as one it has seen (docs/backups.md).
 */
export const ADVANCE_EVENT_IDS =
  'select setval(s, nextval(s) + 1000000000000) ' +
  "from cast(pg_get_serial_sequence('brand_subscribe_events', 'id') as regclass) as s";

/**
 * Moves every account's feed head on by 10^12 after a restore (a head made for an account that had
 * none): a consumer may hold a cursor into the lost part of the feed, which the restored feed would
 * otherwise fill with new sets at the same positions and accept again, skipping what came before
 * it. With new sets placed past the gap, such a cursor reads every new event (docs/backups.md).
 */
export const ADVANCE_FEED_POSITIONS =
  'insert into event_feed_heads (account_id, sequenced_through) select id, 1000000000000 from accounts ' +
  'on conflict (account_id) do update set sequenced_through = event_feed_heads.sequenced_through + 1000000000000';

/** `psql` running one statement, stopping at its error. */
export const psqlArgs = (url: string, statement: string) => [
  'psql',
  '--no-psqlrc',
  '--set=ON_ERROR_STOP=1',
  `--dbname=${url}`,
  `--command=${statement}`,
];

/** Runs one of the commands above with the server's binaries; throws with its stderr when it fails. */
export async function runPgClient(args: string[]): Promise<{ ms: number }> {
  const bin = await findBinDir();
  const started = performance.now();
  const p = Bun.spawn([join(bin, args[0]!), ...args.slice(1)], { stdout: 'pipe', stderr: 'pipe' });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${args[0]} failed (exit ${code}): ${err || out}`);
  return { ms: Math.round(performance.now() - started) };
}

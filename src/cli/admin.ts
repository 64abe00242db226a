/**
 * The admin CLI: `bun run admin <command> [flags]`. Prints exactly one JSON object on stdout and
 * exits 0; otherwise one line on stderr and exit 2 (usage: bad command, flag or value) or 1 (the
 * data refused it: unknown account, duplicate name, no database...).
 */
import { ConfigError, loadConfig } from '../config';
import { connect } from '../db';
import { migrate } from '../migrate';
import { accountCommands } from './admin/accounts';
import { AdminError, UsageError, type Command } from './admin/args';
import { attributeCommands } from './admin/attributes';
import { brandCommands } from './admin/brands';
import { citusCommands } from './admin/citus';
import { demoCommands } from './admin/demo';
import { erasureCommands } from './admin/erasures';
import { importCommands } from './admin/import';
import { keyCommands } from './admin/keys';
import { seedCommands } from './admin/seeds';
import { suppressionImportCommands } from './admin/suppression-import';
import { suppressionListCommands } from './admin/suppression-lists';
import { resolveDatabaseUrl } from '../embedded/urls';

const COMMANDS: Record<string, Command> = {
  ...accountCommands,
  ...keyCommands,
  ...brandCommands,
  ...attributeCommands,
  ...suppressionListCommands,
  ...seedCommands,
  ...importCommands,
  ...suppressionImportCommands,
  ...demoCommands,
  ...erasureCommands,
  ...citusCommands,
};

function usage(): string {
  const lines = Object.values(COMMANDS).map((c) => `  ${c.usage}`);
  return [
    'usage: bun run admin <command> [flags]',
    '',
    'commands:',
    ...lines,
    '',
    'Extensions beyond the interface contract:',
    '- import --file takes a CSV file, or a gzip-compressed one (e.g. list.csv.gz; recognised by its first',
    '  bytes), read through gunzip as it streams.',
    '- import prints the finished import; when rows were rejected, its rejectedRowsUrl is the CSV report of',
    '  every row not added or updated and why (GET it with an imports:read key).',
    '- import cancel fails an import that is awaiting its upload or uploaded, freeing the account at once.',
    '- citus distribute distributes the tables of a database that got Citus after its migrations, with their',
    '  rows (docs/scaling-out.md); refused while an import runs.',
    "- erasures lists the account's contact erasures (DELETE /v1/contacts/{emailMd5}, POST /v1/contact-erasures),",
    '  oldest first: emailMd5, key id and time, never the address; --email-md5 narrows it to one contact.',
    '',
    'Uses DATABASE_URL, or the embedded local PostgreSQL.',
  ].join('\n');
}

/** `group action` commands first, then single-word ones (`demo`). */
function findCommand(argv: readonly string[]): { command: Command; rest: readonly string[] } {
  const two = `${argv[0]} ${argv[1]}`;
  if (Object.hasOwn(COMMANDS, two)) return { command: COMMANDS[two]!, rest: argv.slice(2) };
  if (argv[0] !== undefined && Object.hasOwn(COMMANDS, argv[0]))
    return { command: COMMANDS[argv[0]]!, rest: argv.slice(1) };
  const known = [...new Set(Object.keys(COMMANDS).map((k) => k.split(' ')[0]))];
  if (argv[0] !== undefined && known.includes(argv[0])) {
    const actions = Object.keys(COMMANDS).filter((k) => k.startsWith(`${argv[0]} `));
    throw new UsageError(`unknown command "${argv.slice(0, 2).join(' ')}"; try ${actions.join(', ')}`);
  }
  throw new UsageError(`unknown command "${argv[0]}"; run with --help for the list`);
}

async function execute(argv: readonly string[]): Promise<object> {
  const { command, rest } = findCommand(argv);
  // Flags are checked before any database is started or touched.
  const work = command.prepare(rest);
  const { url, stop } = await resolveDatabaseUrl(loadConfig());
  const sql = connect(url, 2);
  try {
    await migrate(sql);
    return await work(sql);
  } finally {
    await sql.end({ timeout: 5 });
    await stop();
  }
}

async function main(argv: readonly string[]): Promise<number> {
  if (argv.length === 0 || argv.includes('--help') || argv.includes('-h')) {
    console.error(usage());
    return 2;
  }
  try {
    const result = await execute(argv);
    await Bun.write(Bun.stdout, `${JSON.stringify(result)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`admin: ${err.message} (see --help)`);
      return 2;
    }
    if (err instanceof AdminError || err instanceof ConfigError) {
      console.error(`admin: ${err.message}`);
      return 1;
    }
    // Unexpected (database down, a bug): still one line; ADMIN_DEBUG=1 shows the stack.
    const message = err instanceof Error ? err.message : String(err);
    console.error(`admin: unexpected error: ${message.split('\n')[0]}`);
    if (process.env.ADMIN_DEBUG) console.error(err);
    return 1;
  }
}

process.exit(await main(process.argv.slice(2)));

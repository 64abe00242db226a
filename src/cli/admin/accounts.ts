import { cacheChanged } from '../../auth/cache';
import { loadConfig } from '../../config';
import type { Sql } from '../../db';
import {
  AdminError,
  type Command,
  nameFlag,
  OPTIONAL,
  parseFlags,
  REQUIRED,
  SWITCH,
  UsageError,
  uuidFlag,
} from './args';

/** Every command that addresses an account checks it first, so a typo gives a clear message. */
export async function requireAccount(sql: Sql, accountId: string): Promise<void> {
  const [row] = await sql`select 1 from accounts where id = ${accountId}`;
  if (!row) throw new AdminError(`no account ${accountId}`);
}

export async function createAccount(sql: Sql, name: string): Promise<string> {
  const [row] = await sql<{ id: string }[]>`insert into accounts (name) values (${name}) returning id`;
  return row!.id;
}

export const accountCommands: Record<string, Command> = {
  'account create': {
    usage: 'account create --name N',
    prepare(argv) {
      const flags = parseFlags(argv, { name: REQUIRED });
      const name = nameFlag('name', flags.name);
      return async (sql) => ({ id: await createAccount(sql, name) });
    },
  },
  'account suspend': {
    usage: 'account suspend --account ID',
    prepare(argv) {
      const accountId = uuidFlag('account', parseFlags(argv, { account: REQUIRED }).account);
      return async (sql) => {
        await requireAccount(sql, accountId);
        // Suspending again keeps the first suspension time.
        await sql.begin(async (tx) => {
          await tx`update accounts set suspended_at = least(suspended_at, now()) where id = ${accountId}`;
          await cacheChanged(tx, accountId, 'accounts');
        });
        return { id: accountId, suspended: true };
      };
    },
  },
  'account unsuspend': {
    usage: 'account unsuspend --account ID',
    prepare(argv) {
      const accountId = uuidFlag('account', parseFlags(argv, { account: REQUIRED }).account);
      return async (sql) => {
        await requireAccount(sql, accountId);
        // What waited resumes by itself (src/auth/suspension.ts): the worker looks again within seconds.
        await sql.begin(async (tx) => {
          await tx`update accounts set suspended_at = null where id = ${accountId}`;
          await cacheChanged(tx, accountId, 'accounts');
        });
        return { id: accountId, suspended: false };
      };
    },
  },
  'account rate-limit': {
    usage: 'account rate-limit --account ID [--per-second N --burst M | --default]',
    prepare(argv) {
      const flags = parseFlags(argv, { account: REQUIRED, 'per-second': OPTIONAL, burst: OPTIONAL, default: SWITCH });
      const accountId = uuidFlag('account', flags.account);
      const given = flags['per-second'] !== undefined || flags.burst !== undefined;
      if (given && flags.default) throw new UsageError('--default takes no --per-second or --burst');
      if (given && (flags['per-second'] === undefined || flags.burst === undefined))
        throw new UsageError('--per-second and --burst go together');
      const own = given
        ? {
            perSecond: positiveFlag('per-second', flags['per-second']!, 10_000_000),
            burst: positiveFlag('burst', flags.burst!, 100_000_000),
          }
        : undefined;
      // The defaults as the API reads them from the same environment (RATE_LIMIT_PER_SECOND, RATE_LIMIT_BURST).
      const config = loadConfig();
      return async (sql) => {
        await requireAccount(sql, accountId);
        if (own || flags.default)
          await sql.begin(async (tx) => {
            await tx`
              update accounts
              set rate_limit_per_second = ${own?.perSecond ?? null}, rate_limit_burst = ${own?.burst ?? null}
              where id = ${accountId}`;
            // Every replica drops the account's cached keys, and reads the limits with the next key it checks.
            await cacheChanged(tx, accountId, 'accounts');
          });
        const [row] = await sql<{ perSecond: number | null; burst: number | null }[]>`
          select rate_limit_per_second as "perSecond", rate_limit_burst as burst from accounts where id = ${accountId}`;
        const isDefault = row!.perSecond === null || row!.burst === null;
        return {
          id: accountId,
          perSecond: isDefault ? config.rateLimitPerSecond : row!.perSecond,
          burst: isDefault ? config.rateLimitBurst : row!.burst,
          default: isDefault,
        };
      };
    },
  },
};

function positiveFlag(name: string, value: string, max: number): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1 || n > max)
    throw new UsageError(`--${name} must be an integer from 1 to ${max}, got "${value}"`);
  return n;
}

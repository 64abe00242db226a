import { cacheChanged } from '../../auth/cache';
import type { Sql } from '../../db';
import { AdminError, type Command, nameFlag, parseFlags, REQUIRED, uuidFlag } from './args';

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
};

import type { Sql } from '../../db';
import { isValidEmail } from '../../contacts/email';
import { requireAccount } from './accounts';
import { type Command, parseFlags, REQUIRED, UsageError, uuidFlag } from './args';

/** The trimmed address when it passes the service's one email rule, else undefined. */
export function validEmail(raw: string): string | undefined {
  const email = raw.trim();
  return isValidEmail(email) ? email : undefined;
}

export async function addSeed(sql: Sql, accountId: string, email: string): Promise<string> {
  // md5 in SQL, as md5(lower(trim(email))) is computed elsewhere, so non-ASCII lowercasing agrees.
  const [row] = await sql<{ md5: string }[]>`select md5(lower(${email})) as md5`;
  const md5 = row!.md5;
  // With the account's seeds counter, which tells the API's fast path to look for seeds
  // (sql/migrations/0018), in the same transaction.
  await sql.begin(async (tx) => {
    await tx`
      insert into seed_addresses (account_id, email_md5, email) values (${accountId}, ${md5}::uuid, ${email})
      on conflict do nothing`;
    await tx`select seeds_changed(${accountId}::uuid)`;
  });
  return md5;
}

export const seedCommands: Record<string, Command> = {
  'seed add': {
    usage: 'seed add --account ID --email E',
    prepare(argv) {
      const flags = parseFlags(argv, { account: REQUIRED, email: REQUIRED });
      const accountId = uuidFlag('account', flags.account);
      const email = validEmail(flags.email);
      if (!email) throw new UsageError(`--email is not a valid email address: "${flags.email}"`);
      return async (sql) => {
        await requireAccount(sql, accountId);
        return { emailMd5: await addSeed(sql, accountId, email) };
      };
    },
  },
};

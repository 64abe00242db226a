import type { Sql } from '../../db';
import { requireAccount } from './accounts';
import { parseFlags, UsageError, uuidFlag, type Command } from './args';

// Whitespace (incl. Unicode spaces) and control characters are never part of an address.
const SPACE_OR_CONTROL = /[\s\u0000-\u001f\u007f-\u009f]/u;

/**
 * The design's email rule: trimmed, at most 254 characters, exactly one `@` with something before
 * it, a dotted domain with no empty label, no spaces or control characters. Returns the trimmed
 * address, or undefined when it is not one.
 */
export function validEmail(raw: string): string | undefined {
  const email = raw.trim();
  if (email.length === 0 || email.length > 254 || SPACE_OR_CONTROL.test(email)) return undefined;
  const parts = email.split('@');
  if (parts.length !== 2) return undefined;
  const [local, domain] = parts as [string, string];
  if (local === '' || !domain.includes('.') || domain.split('.').some((label) => label === '')) return undefined;
  return email;
}

export async function addSeed(sql: Sql, accountId: string, email: string): Promise<string> {
  // md5 in SQL, as md5(lower(trim(email))) is computed elsewhere, so non-ASCII lowercasing agrees.
  const [row] = await sql<{ md5: string }[]>`select md5(lower(${email})) as md5`;
  const md5 = row!.md5;
  await sql`
    insert into seed_addresses (account_id, email_md5, email) values (${accountId}, ${md5}::uuid, ${email})
    on conflict do nothing`;
  return md5;
}

export const seedCommands: Record<string, Command> = {
  'seed add': {
    usage: 'seed add --account ID --email E',
    prepare(argv) {
      const flags = parseFlags(argv, { account: { kind: 'string', required: true }, email: { kind: 'string', required: true } });
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

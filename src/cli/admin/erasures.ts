import { uuidToMd5, md5ToUuid } from '../../contacts/email';
import { requireAccount } from './accounts';
import { type Command, OPTIONAL, parseFlags, REQUIRED, UsageError, uuidFlag } from './args';

const MD5 = /^[0-9a-fA-F]{32}$/;

/**
 * The operator's record of erasures (src/contacts/erase.ts): who erased which contact when, by
 * emailMd5 only, oldest first; `--email-md5` answers "was this person erased, and when".
 */
export const erasureCommands: Record<string, Command> = {
  erasures: {
    usage: 'erasures --account ID [--email-md5 H]',
    prepare(argv) {
      const flags = parseFlags(argv, { account: REQUIRED, 'email-md5': OPTIONAL });
      const accountId = uuidFlag('account', flags.account);
      const md5 = flags['email-md5'];
      if (md5 !== undefined && !MD5.test(md5))
        throw new UsageError(`--email-md5 must be 32 hexadecimal characters: "${md5}"`);
      return async (sql) => {
        await requireAccount(sql, accountId);
        const rows = await sql<{ email_md5: string; key_id: string | null; erased_at: Date }[]>`
          select email_md5, key_id, erased_at from contact_erasures
          where account_id = ${accountId} ${md5 === undefined ? sql`` : sql`and email_md5 = ${md5ToUuid(md5)}::uuid`}
          order by id`;
        return {
          accountId,
          erasures: rows.map((r) => ({
            emailMd5: uuidToMd5(r.email_md5),
            ...(r.key_id !== null && { keyId: r.key_id }),
            erasedAt: r.erased_at.toISOString(),
          })),
        };
      };
    },
  },
};

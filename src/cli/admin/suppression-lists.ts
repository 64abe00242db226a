import type { Sql, Tx } from '../../db';
import { requireAccount } from './accounts';
import { type Command, nameFlag, OPTIONAL, parseFlags, REQUIRED, SWITCH, UsageError, uuidFlag } from './args';

export type ListFormat = 'plain text' | 'md5' | 'sha512';

// `plain text` has a space, awkward in shells and scripts: accept the spellings people type.
const FORMATS = new Map<string, ListFormat>([
  ['plain text', 'plain text'],
  ['plain-text', 'plain text'],
  ['plaintext', 'plain text'],
  ['md5', 'md5'],
  ['sha512', 'sha512'],
]);

export interface ListInput {
  name: string;
  format: ListFormat;
  isGlobal: boolean;
  offerId?: string;
}

export async function createSuppressionList(sql: Sql | Tx, accountId: string, l: ListInput): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into suppression_lists (account_id, name, format, is_global, offer_id)
    values (${accountId}, ${l.name}, ${l.format}, ${l.isGlobal}, ${l.offerId ?? null})
    returning id`;
  return row!.id;
}

export const suppressionListCommands: Record<string, Command> = {
  'suppression-list create': {
    usage: 'suppression-list create --account ID --name N --format "plain text"|md5|sha512 [--global] [--offer ID]',
    prepare(argv) {
      const flags = parseFlags(argv, {
        account: REQUIRED,
        name: REQUIRED,
        format: REQUIRED,
        global: SWITCH,
        offer: OPTIONAL,
      });
      const accountId = uuidFlag('account', flags.account);
      const format = FORMATS.get(flags.format.trim().toLowerCase());
      if (!format)
        throw new UsageError(`--format must be "plain text" (or plain-text), md5 or sha512, got "${flags.format}"`);
      const list: ListInput = {
        name: nameFlag('name', flags.name),
        format,
        isGlobal: flags.global,
        // Offer ids belong to another system, so any non-empty text is accepted.
        ...(flags.offer !== undefined && { offerId: nameFlag('offer', flags.offer) }),
      };
      return async (sql) => {
        await requireAccount(sql, accountId);
        return { id: await createSuppressionList(sql, accountId, list) };
      };
    },
  },
};

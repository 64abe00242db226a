import type { Sql, Tx } from '../../db';
import { requireAccount } from './accounts';
import {
  AdminError,
  type Command,
  LIST,
  nameFlag,
  OPTIONAL,
  parseFlags,
  REQUIRED,
  SWITCH,
  UsageError,
  uuidFlag,
} from './args';
import { validEmail } from './seeds';

export interface BrandInput {
  name: string;
  enabled: boolean;
  fromAddress?: string;
  domain?: string;
  esps: string[];
  verticals: { id: number; label: string }[];
  unsubscribePageId?: string;
  useListUnsubscribeHeader: boolean;
}

const DOMAIN = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** `CODE:LABEL`, split at the first colon so labels may contain colons. */
function parseVertical(value: string): { id: number; label: string } {
  const colon = value.indexOf(':');
  const code = colon === -1 ? value : value.slice(0, colon);
  const label = colon === -1 ? '' : value.slice(colon + 1).trim();
  if (!/^\d+$/.test(code.trim()) || !Number.isSafeInteger(Number(code))) {
    throw new UsageError(`--vertical must be CODE:LABEL with an integer CODE, got "${value}"`);
  }
  if (label === '') throw new UsageError(`--vertical needs a non-empty label after the colon, got "${value}"`);
  return { id: Number(code), label };
}

export function parseBrandFlags(argv: readonly string[]): { accountId: string; brand: BrandInput } {
  const flags = parseFlags(argv, {
    account: REQUIRED,
    name: REQUIRED,
    disabled: SWITCH,
    'from-address': OPTIONAL,
    domain: OPTIONAL,
    esp: LIST,
    vertical: LIST,
    'unsubscribe-page': OPTIONAL,
    'list-unsubscribe-header': SWITCH,
  });
  const from = flags['from-address'];
  const fromAddress = from === undefined ? undefined : validEmail(from);
  if (from !== undefined && !fromAddress)
    throw new UsageError(`--from-address is not a valid email address: "${from}"`);
  const domain = flags.domain?.trim().toLowerCase();
  if (domain !== undefined && !DOMAIN.test(domain))
    throw new UsageError(`--domain is not a valid domain name: "${flags.domain}"`);
  const verticals = flags.vertical.map(parseVertical);
  const codes = verticals.map((v) => v.id);
  if (new Set(codes).size !== codes.length) throw new UsageError('--vertical codes must be unique');
  const page = flags['unsubscribe-page'];
  return {
    accountId: uuidFlag('account', flags.account),
    brand: {
      name: nameFlag('name', flags.name),
      enabled: !flags.disabled,
      ...(fromAddress !== undefined && { fromAddress }),
      ...(domain !== undefined && { domain }),
      esps: flags.esp.map((e) => nameFlag('esp', e)),
      verticals,
      ...(page !== undefined && { unsubscribePageId: uuidFlag('unsubscribe-page', page) }),
      useListUnsubscribeHeader: flags['list-unsubscribe-header'],
    },
  };
}

/** Each ESP attachment gets its own id, as the API shows `esps: [{id, name}]`. */
export async function createBrand(sql: Sql | Tx, accountId: string, b: BrandInput): Promise<string> {
  const esps = b.esps.map((name) => ({ id: crypto.randomUUID(), name }));
  try {
    const [row] = await sql<{ id: string }[]>`
      insert into brands (account_id, name, enabled, from_address, domain, esps, verticals, unsubscribe_page_id,
                          use_list_unsubscribe_header)
      values (${accountId}, ${b.name}, ${b.enabled}, ${b.fromAddress ?? null}, ${b.domain ?? null}, ${sql.json(esps)},
              ${sql.json(b.verticals)}, ${b.unsubscribePageId ?? null}, ${b.useListUnsubscribeHeader})
      returning id`;
    return row!.id;
  } catch (err) {
    // The partial unique index is the race-free check: CSV Brand cells match names case-insensitively.
    if ((err as { code?: string }).code === '23505') {
      throw new AdminError(
        `a brand named "${b.name}" already exists in account ${accountId} (names are unique case-insensitively)`,
      );
    }
    throw err;
  }
}

export const brandCommands: Record<string, Command> = {
  'brand create': {
    usage:
      'brand create --account ID --name N [--disabled] [--from-address A] [--domain D] [--esp NAME]... ' +
      '[--vertical CODE:LABEL]... [--unsubscribe-page UUID] [--list-unsubscribe-header]',
    prepare(argv) {
      const { accountId, brand } = parseBrandFlags(argv);
      return async (sql) => {
        await requireAccount(sql, accountId);
        return { id: await createBrand(sql, accountId, brand) };
      };
    },
  },
  'brand delete': {
    usage: 'brand delete --account ID --brand ID',
    prepare(argv) {
      const flags = parseFlags(argv, { account: REQUIRED, brand: REQUIRED });
      const accountId = uuidFlag('account', flags.account);
      const brandId = uuidFlag('brand', flags.brand);
      return async (sql) => {
        await requireAccount(sql, accountId);
        // Soft delete: the row stays so contacts whose brandIds still hold the id can name it.
        // Deleting an already deleted brand succeeds and keeps the first deletion time.
        const [row] = await sql`
          update brands set deleted_at = least(deleted_at, now())
          where account_id = ${accountId} and id = ${brandId}
          returning id`;
        if (!row) throw new AdminError(`no brand ${brandId} in account ${accountId}`);
        return { id: brandId, deleted: true };
      };
    },
  },
};

import type { Sql, Tx } from '../../db';
import { isObjectInternalName, PREDEFINED, type AttributeType } from '../../schema/service';
import { requireAccount } from './accounts';
import { AdminError, nameFlag, parseFlags, UsageError, uuidFlag, type Command } from './args';

const TYPES: readonly AttributeType[] = ['string', 'email', 'number', 'boolean', 'array'];
// Long enough for an honest Retry-After on writes that arrive while a schema change runs.
const HOLD_ESTIMATE = '5 seconds';

export interface AttributeInput {
  name: string;
  type: AttributeType;
  description?: string;
}

/**
 * Runs `fn` as a schema change that holds the account's contact writes. Three steps, because a
 * bulk_operations row inserted and deleted in one transaction would never be visible to the writers
 * it is meant to turn away: (1) publish the hold row; (2) one transaction under the exclusive form
 * of the account's advisory lock (single contact writes and an import's merge batches take the
 * shared form), so nothing interleaves with the change; (3) remove the hold row, whatever happened.
 */
export async function withSchemaChangeHold<T>(sql: Sql, accountId: string, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const holdId = crypto.randomUUID();
  await sql`
    insert into bulk_operations (account_id, id, kind, estimated_end)
    values (${accountId}, ${holdId}, 'schema-change', now() + ${HOLD_ESTIMATE}::interval)`;
  try {
    // The key is hashed from the uuid's canonical text, exactly as account_id::text gives it.
    return (await sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(hashtextextended(${accountId}::uuid::text, 0))`;
      return fn(tx);
    })) as T;
  } finally {
    await sql`delete from bulk_operations where account_id = ${accountId} and id = ${holdId}`;
  }
}

/**
 * `name:sub` keys are derived sub-attributes of email attributes, so a stored name never holds a
 * colon; Email and Brand are predefined and never stored.
 */
export function validAttribute(name: string, type: string, description: string | undefined): AttributeInput {
  const n = nameFlag('name', name);
  if (PREDEFINED.some((p) => p.name.toLowerCase() === n.toLowerCase())) throw new UsageError(`"${n}" is a predefined attribute`);
  if (isObjectInternalName(n)) throw new UsageError(`"${n}" is the name of a JavaScript object internal and cannot be an attribute name`);
  if (n.includes(':')) throw new UsageError(`attribute names must not contain ":" (it separates derived keys such as name:md5)`);
  if (!(TYPES as readonly string[]).includes(type)) throw new UsageError(`--type must be one of ${TYPES.join(', ')}, got "${type}"`);
  const d = description?.trim();
  return { name: n, type: type as AttributeType, ...(d && { description: d }) };
}

export async function createAttribute(sql: Sql, accountId: string, a: AttributeInput): Promise<string> {
  try {
    await withSchemaChangeHold(sql, accountId, async (tx) => {
      await tx`
        insert into schema_attributes (account_id, name, type, description)
        values (${accountId}, ${a.name}, ${a.type}, ${a.description ?? null})`;
    });
  } catch (err) {
    if ((err as { code?: string }).code === '23505') {
      throw new AdminError(`an attribute named "${a.name}" already exists in account ${accountId} (names are unique case-insensitively)`);
    }
    throw err;
  }
  return a.name;
}

export const attributeCommands: Record<string, Command> = {
  'attribute create': {
    usage: 'attribute create --account ID --name N --type string|email|number|boolean|array [--description D]',
    prepare(argv) {
      const flags = parseFlags(argv, {
        account: { kind: 'string', required: true },
        name: { kind: 'string', required: true },
        type: { kind: 'string', required: true },
        description: { kind: 'string' },
      });
      const accountId = uuidFlag('account', flags.account);
      const attribute = validAttribute(flags.name, flags.type, flags.description);
      return async (sql) => {
        await requireAccount(sql, accountId);
        return { name: await createAttribute(sql, accountId, attribute) };
      };
    },
  },
};

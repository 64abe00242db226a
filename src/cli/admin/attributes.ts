import { attributeProblem, createAttribute, DuplicateAttributeError } from '../../schema/change';
import type { SchemaAttribute } from '../../schema/service';
import { requireAccount } from './accounts';
import { AdminError, type Command, nameFlag, OPTIONAL, parseFlags, REQUIRED, UsageError, uuidFlag } from './args';

export type AttributeInput = SchemaAttribute;

/** The flags of `attribute create` as an attribute, or a UsageError saying what is wrong. */
export function validAttribute(name: string, type: string, description: string | undefined): AttributeInput {
  const n = nameFlag('name', name);
  const problem = attributeProblem(n, type);
  if (problem) throw new UsageError(problem);
  const d = description?.trim();
  return { name: n, type: type as AttributeInput['type'], ...(d && { description: d }) };
}

/** createAttribute of src/schema/change.ts, its refusal as the CLI's AdminError (exit code 1). */
export async function addAttribute(sql: Parameters<typeof createAttribute>[0], accountId: string, a: AttributeInput) {
  try {
    return await createAttribute(sql, accountId, a);
  } catch (err) {
    if (err instanceof DuplicateAttributeError) throw new AdminError(err.message, { cause: err });
    throw err;
  }
}

export const attributeCommands: Record<string, Command> = {
  'attribute create': {
    usage: 'attribute create --account ID --name N --type string|email|number|boolean|array [--description D]',
    prepare(argv) {
      const flags = parseFlags(argv, { account: REQUIRED, name: REQUIRED, type: REQUIRED, description: OPTIONAL });
      const accountId = uuidFlag('account', flags.account);
      const attribute = validAttribute(flags.name, flags.type, flags.description);
      return async (sql) => {
        await requireAccount(sql, accountId);
        return { name: await addAttribute(sql, accountId, attribute) };
      };
    },
  },
};

import type { Sql } from '../../db';
import { ApiError } from '../../errors';
import {
  runManualSuppressionImport,
  UnreadableFileError,
  type ManualImportResult,
} from '../../suppressions/bulk/manual-import';
import { requireAccount } from './accounts';
import { AdminError, type Command, parseFlags, REQUIRED, UsageError, uuidFlag } from './args';

export interface SuppressionImportFlags {
  account?: string;
  list?: string;
  file?: string;
}

/**
 * `suppression-import --account ID --list ID --file PATH`: a `method: manual` import of a local file
 * into a suppression list, run in this process to its end. One record per line, or a CSV whose
 * first column holds the record; blank lines are skipped and unreadable lines counted as malformed.
 * Returns `{id, totalCount, addedCount, duplicateCount, malformedCount}`.
 */
export async function suppressionImportCommand(sql: Sql, flags: SuppressionImportFlags): Promise<ManualImportResult> {
  if (!flags.account) throw new UsageError('--account is required');
  if (!flags.list) throw new UsageError('--list is required');
  if (!flags.file) throw new UsageError('--file is required');
  const accountId = uuidFlag('account', flags.account);
  const listId = uuidFlag('list', flags.list);
  await requireAccount(sql, accountId);
  try {
    return await runManualSuppressionImport(sql, { accountId, listId, file: flags.file });
  } catch (error) {
    // Not found (the list) and operation_in_progress (the list is busy) are the operator's to fix.
    if (error instanceof ApiError && error.code !== 'api_error') {
      const wait = error.retryAfter ? ` (retry in about ${error.retryAfter} s)` : '';
      throw new AdminError(`${error.detail}${wait}`, { cause: error });
    }
    if (error instanceof UnreadableFileError) throw new AdminError(error.message, { cause: error });
    throw error;
  }
}

/** The command table entry for src/cli/admin.ts. */
export const suppressionImportCommands: Record<string, Command> = {
  'suppression-import': {
    usage: 'suppression-import --account ID --list ID --file PATH',
    prepare(argv) {
      const flags = parseFlags(argv, { account: REQUIRED, list: REQUIRED, file: REQUIRED });
      uuidFlag('account', flags.account);
      uuidFlag('list', flags.list);
      return (sql) => suppressionImportCommand(sql, flags);
    },
  },
};

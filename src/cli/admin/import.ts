import { createReadStream } from 'node:fs';
import Papa from 'papaparse';
import type { Config } from '../../config';
import type { Sql } from '../../db';
import { resolveColumns } from '../../imports/columns';
import { getSchema } from '../../schema/service';
import { createStore, importObjectKey } from '../../storage';
import type { ObjectStore } from '../../storage/store';
import { insertImport, isOpenImportConflict, markImportFailed, markUploaded } from '../../imports/lifecycle';
import { runImport, UnrecoverableImportError } from '../../../worker/import/index';
import { decompressed } from '../../../worker/import/decompress';
import { ImportFileError } from '../../../worker/import/errors';
import { isSuspended } from '../../auth/suspension';
import { requireAccount } from './accounts';
import { AdminError, parseFlags, UsageError, uuidFlag, type Command } from './args';
import { loadConfig } from '../../config';
import { ApiError } from '../../errors';
import { cancelContactImport } from '../../imports/cancel';
import { getImport } from '../../imports/service';

export interface ImportFlags {
  account?: string;
  file?: string;
  strategy?: string;
  brand?: string[];
  'overwrite-brands'?: boolean;
  'restore-disabled'?: boolean;
  'no-events'?: boolean;
}

/** How much of the file is read to find the header row. */
const HEADER_BYTES = 1 << 20;
/** A transient fault (connection, deadlock) is retried this many times, as the queue would. */
const ATTEMPTS = 3;

/**
 * `import --account ID --file PATH --strategy S [--brand ID]… [--overwrite-brands]
 * [--restore-disabled] [--no-events]`: a `method: manual` contact import of a local CSV file, run
 * in this process to its end. The columns are the file's header (matched case-insensitively to the
 * schema); the file goes through the object store like an upload, so the worker's pipeline and
 * rules apply unchanged. `store` is for tests; by default the configured store is used.
 *
 * A gzip-compressed file (recognised by its first bytes, whatever its name) is stored as it is and
 * read through gunzip, here for the header and by the worker for the rows: an extension beyond the
 * contract, the same one the upload link offers.
 */
export async function importCommand(
  sql: Sql,
  config: Config,
  flags: ImportFlags,
  store?: ObjectStore,
): Promise<{ id: string }> {
  if (!flags.account) throw new UsageError('--account is required');
  if (!flags.file) throw new UsageError('--file is required');
  if (!flags.strategy) throw new UsageError('--strategy is required');
  const accountId = uuidFlag('account', flags.account);
  const strategy = flags.strategy;
  if (strategy !== 'overwrite' && strategy !== 'keep' && strategy !== 'skip')
    throw new UsageError(`--strategy must be overwrite, keep or skip, got "${strategy}"`);
  const brandIds = [...new Set((flags.brand ?? []).map((b) => uuidFlag('brand', b)))];

  await requireAccount(sql, accountId);
  // It would wait, open, until the account is unsuspended (worker/import/index.ts): say so now instead.
  if (await isSuspended(sql, accountId))
    throw new AdminError(`account ${accountId} is suspended; unsuspend it before importing into it`);
  const header = await readHeader(flags.file);
  const { columns, errors } = resolveColumns(await getSchema(sql, accountId), header);
  if (errors.length)
    throw new AdminError(`the file's header does not fit the contact schema: ${errors.map((e) => e.detail).join(' ')}`);
  if (brandIds.length) {
    const found = await sql<{ id: string }[]>`
      select id::text as id from brands
      where account_id = ${accountId} and id = any(${sql.array(brandIds)}::uuid[]) and deleted_at is null`;
    const missing = brandIds.filter((id) => !found.some((f) => f.id === id));
    if (missing.length) throw new AdminError(`no brand ${missing.join(', ')} in account ${accountId}`);
  }

  const id = crypto.randomUUID();
  const key = importObjectKey(accountId, id);
  try {
    // awaiting-upload first: the row claims the account's one open import before the copy starts.
    await insertImport(sql, accountId, id, {
      method: 'manual',
      columns,
      strategy,
      overwriteBrands: flags['overwrite-brands'] ?? false,
      restoreDisabled: flags['restore-disabled'] ?? false,
      publishEvents: !(flags['no-events'] ?? false),
      brandIds,
      objectKey: key,
    });
  } catch (e) {
    if (isOpenImportConflict(e)) {
      throw new AdminError(`another import is open for account ${accountId}; wait until it ends`);
    }
    throw e;
  }

  const storage = store ?? (await createStore(config));
  try {
    const info = await storage.putFile(key, flags.file);
    // The file is this command's own copy: nothing can replace it, so its ETag is pinned at once.
    await markUploaded(sql, accountId, id, { key, size: info.size, etag: info.etag });
  } catch (e) {
    await markImportFailed(sql, accountId, id, 'The file could not be stored.');
    throw new AdminError(`import ${id}: the file could not be stored: ${(e as Error).message}`, { cause: e });
  }

  for (let attempt = 1; ; attempt++) {
    try {
      await runImport({ sql, storage, config }, accountId, id);
      return await getImport(sql, config.publicUrl, accountId, id);
    } catch (e) {
      if (e instanceof UnrecoverableImportError) throw new AdminError(`import ${id} failed: ${e.reason}`, { cause: e });
      if (attempt >= ATTEMPTS) {
        // No queue will retry a manual import: end it rather than leave the account blocked.
        await markImportFailed(
          sql,
          accountId,
          id,
          'The import stopped after repeated errors; no contacts past the last completed batch were written.',
        );
        throw new AdminError(`import ${id} failed: ${(e as Error).message}`, { cause: e });
      }
      await Bun.sleep(1000 * attempt);
    }
  }
}

/**
 * The file's first row: UTF-8, BOM dropped, quotes honoured, at most the first MB of text looked at.
 * A gzip file (by its first bytes, whatever its name) is read through gunzip, as the worker reads it.
 */
async function readHeader(path: string): Promise<string[]> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    // Leaving the loop early closes the file (and the gunzip behind it).
    for await (const chunk of decompressed(createReadStream(path))) {
      chunks.push(chunk);
      size += chunk.byteLength;
      if (size >= HEADER_BYTES) break;
    }
  } catch (e) {
    // A gzip file broken within its first MB of text: refused before any import is made.
    if (e instanceof ImportFileError) throw new AdminError(`--file ${path}: ${e.message}`, { cause: e });
    throw new AdminError(`cannot read --file ${path}: ${(e as Error).message}`);
  }
  // Not fatal: a bad byte past the header is the pipeline's to report (as a failed import).
  const text = new TextDecoder('utf-8').decode(Buffer.concat(chunks).subarray(0, HEADER_BYTES));
  const first = Papa.parse<string[]>(text, { delimiter: ',', preview: 1, skipEmptyLines: 'greedy' }).data[0];
  if (!first || first.every((c) => c.trim() === ''))
    throw new AdminError(`the file ${path} is empty: it has no header row`);
  return first;
}

/**
 * `import cancel --account ID --import ID`: the API's cancel (an extension beyond the contract) for
 * an operator: an import that is awaiting its upload or uploaded becomes failed, cancelled, and the
 * account may open its next import at once. Prints the import.
 */
export async function cancelCommand(
  sql: Sql,
  config: Config,
  flags: { account?: string; import?: string },
  store?: ObjectStore,
) {
  const accountId = uuidFlag('account', flags.account!);
  const importId = uuidFlag('import', flags.import!);
  await requireAccount(sql, accountId);
  try {
    return await cancelContactImport(sql, store ?? (await createStore(config)), config.publicUrl, accountId, importId);
  } catch (e) {
    if (e instanceof ApiError) throw new AdminError(e.detail, { cause: e });
    throw e;
  }
}

/** The command table entry for src/cli/admin.ts (`...importCommands`). */
export const importCommands: Record<string, Command> = {
  'import cancel': {
    usage: 'import cancel --account ID --import ID',
    prepare(argv) {
      const flags = parseFlags(argv, {
        account: { kind: 'string', required: true },
        import: { kind: 'string', required: true },
      });
      return (sql) => cancelCommand(sql, loadConfig(), flags);
    },
  },
  import: {
    usage:
      'import --account ID --file PATH.csv|PATH.csv.gz --strategy overwrite|keep|skip [--brand ID]… ' +
      '[--overwrite-brands] [--restore-disabled] [--no-events]',
    prepare(argv) {
      const flags = parseFlags(argv, {
        account: { kind: 'string', required: true },
        file: { kind: 'string', required: true },
        strategy: { kind: 'string', required: true },
        brand: { kind: 'list' },
        'overwrite-brands': { kind: 'boolean' },
        'restore-disabled': { kind: 'boolean' },
        'no-events': { kind: 'boolean' },
      });
      // The pipeline holds one connection for the whole run and needs a second: the CLI's pool of 2 is enough.
      return (sql) => importCommand(sql, loadConfig(), flags);
    },
  },
};

import type { Sql } from '../../src/db';
import { getSchema } from '../../src/schema/service';
import { BrandIndex, type Column } from './cells';
import { ImportFileError } from './errors';
import { type ImportJob } from './state';

/**
 * The declared columns with their schema types. Columns were checked against the schema when the
 * import was created and attributes are never deleted, so a miss here means the schema changed
 * under the import: the import fails rather than guessing.
 */
export async function loadColumns(sql: Sql, job: ImportJob): Promise<Column[]> {
  const schema = await getSchema(sql, job.accountId);
  const byLower = new Map(schema.map((a) => [a.name.toLowerCase(), a]));
  return job.columns.map((name) => {
    const lower = name.toLowerCase();
    if (lower === 'email') return { name: 'Email', type: 'identity' };
    if (lower === 'brand') return { name: 'Brand', type: 'brand' };
    const a = byLower.get(lower);
    if (!a) throw new ImportFileError(`Column "${name}" is no longer in the contact schema.`);
    return { name: a.name, type: a.type };
  });
}

/** The account's live (not deleted) brands; enabled or not, a brand can be assigned. */
export async function loadBrands(sql: Sql, accountId: string): Promise<BrandIndex> {
  const rows = await sql<{ id: string; name: string }[]>`
    select id::text as id, name from brands where account_id = ${accountId}::uuid and deleted_at is null`;
  return new BrandIndex(rows);
}

/**
 * Why the header row does not match the declared columns, or undefined when it does. Names are
 * compared ignoring case and surrounding whitespace; the reason names the first mismatch.
 * @example
 * headerMismatch(['email', 'foo'], [{ name: 'Email', type: 'identity' }, { name: 'lastName', type: 'string' }])
 * // 'Header column 2 is "foo", expected "lastName".'
 */
export function headerMismatch(header: readonly string[], columns: readonly Column[]): string | undefined {
  const n = Math.max(header.length, columns.length);
  for (let i = 0; i < n; i++) {
    const cell = header[i]?.trim();
    // A broken quote can swallow much of the file into one cell: keep the reason readable.
    const got = cell !== undefined && cell.length > 100 ? `${cell.slice(0, 100)}…` : cell;
    const want = columns[i]?.name;
    if (cell !== undefined && want !== undefined && cell.toLowerCase() === want.toLowerCase()) continue;
    if (got === undefined) return `Header column ${i + 1} is missing, expected "${want}".`;
    if (want === undefined)
      return `Header column ${i + 1} is "${got}", but only ${columns.length} columns were declared.`;
    return `Header column ${i + 1} is "${got}", expected "${want}".`;
  }
  return undefined;
}

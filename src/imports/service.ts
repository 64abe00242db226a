import type { Sql } from '../db';
import { ApiError, invalidRequest, notFound, type FieldError } from '../errors';
import { pageOf, pagination } from '../http/pagination';
import { getSchema } from '../schema/service';
import { importObjectKey } from '../storage';
import type { ObjectStore } from '../storage/store';
import type { CreateImportInput } from './model';
import { resolveColumns } from './columns';
import { insertImport, isOpenImportConflict } from './lifecycle';
import { retryAfterSeconds, UPLOAD_WINDOW_MS, type OpenImport } from './retry-after';
import { IMPORT_COLUMNS, toImport, type ImportRow } from './view';

/**
 * Declares an API import and hands out its upload link. Checks run in the spec's order: stored-data
 * checks (columns against the schema, brand ids) before the one-open-import conflict, which
 * PostgreSQL decides through the partial unique index contact_imports_one_open.
 */
export async function createImport(sql: Sql, storage: ObjectStore, accountId: string, body: CreateImportInput) {
  const { columns, errors } = resolveColumns(await getSchema(sql, accountId), body.columns);
  const brandIds = [...new Set((body.brandIds ?? []).map((id) => id.toLowerCase()))];
  errors.push(...(await unknownBrands(sql, accountId, brandIds)));
  if (errors.length) throw invalidRequest(errors[0]!.detail, errors);

  const id = crypto.randomUUID();
  const key = importObjectKey(accountId, id);
  try {
    // The link is signed inside the transaction so a failure to sign leaves no import blocking the account.
    return await sql.begin(async (tx) => {
      const expiresAt = await insertImport(tx, accountId, id, {
        method: 'api',
        columns,
        strategy: body.duplicateContactStrategy,
        overwriteBrands: body.overwriteBrands ?? false,
        restoreDisabled: body.restoreDisabled ?? false,
        publishEvents: body.publishBrandSubscribeEvents ?? true,
        brandIds,
        objectKey: key,
        uploadWindowSeconds: UPLOAD_WINDOW_MS / 1000,
      });
      const uploadUrl = await storage.presignUpload({ key, accountId, importId: id, expiresAt: expiresAt! });
      return { id, status: 'awaiting-upload' as const, uploadUrl, uploadExpiresAt: expiresAt!.toISOString() };
    });
  } catch (e) {
    if (isOpenImportConflict(e)) throw await openImportConflict(sql, accountId, e);
    throw e;
  }
}

async function unknownBrands(sql: Sql, accountId: string, ids: string[]): Promise<FieldError[]> {
  if (!ids.length) return [];
  const rows = await sql<{ id: string }[]>`
    select id from brands
    where account_id = ${accountId} and id = any(${sql.array(ids)}::uuid[]) and deleted_at is null`;
  const known = new Set(rows.map((r) => r.id));
  const unknown = ids.filter((id) => !known.has(id));
  if (!unknown.length) return [];
  return [{ pointer: '/brandIds', detail: `brandIds: no brand ${unknown.join(', ')} in this account.` }];
}

async function openImportConflict(sql: Sql, accountId: string, cause: unknown) {
  const [open] = await sql<(OpenImport & { id: string; now: Date })[]>`
    select id, status, created_at, started_at, object_size, percent_complete, updated_at, now() as now
    from contact_imports
    where account_id = ${accountId} and status in ('awaiting-upload', 'uploaded', 'importing')`;
  // The open import may have finished since the insert failed: then a retry can go at once.
  const seconds = open ? retryAfterSeconds(open, open.now) : 1;
  const what = open ? `Contact import ${open.id} is ${open.status}` : 'Another contact import was open';
  return new ApiError(
    'operation_in_progress',
    `${what}; only one contact import may be open per account.`,
    undefined,
    seconds,
    { cause },
  );
}

export async function getImport(sql: Sql, publicUrl: string, accountId: string, importId: string) {
  const [row] = await sql<ImportRow[]>`
    select ${sql(IMPORT_COLUMNS as unknown as string[])} from contact_imports
    where account_id = ${accountId} and id = ${importId}`;
  if (!row) throw notFound(`No contact import ${importId} in this account.`);
  return toImport(row, publicUrl);
}

/** Newest first, both API and manual imports; the id breaks ties so pages never overlap. */
export async function listImports(
  sql: Sql,
  publicUrl: string,
  accountId: string,
  query: { page?: number; pageSize?: number },
) {
  const p = pageOf(query);
  const [rows, [count]] = await Promise.all([
    sql<ImportRow[]>`
      select ${sql(IMPORT_COLUMNS as unknown as string[])} from contact_imports
      where account_id = ${accountId}
      order by created_at desc, id desc
      limit ${p.pageSize} offset ${p.offset}`,
    sql<{ n: number }[]>`select count(*)::int as n from contact_imports where account_id = ${accountId}`,
  ]);
  return { data: rows.map((r) => toImport(r, publicUrl)), pagination: pagination(p, count!.n) };
}

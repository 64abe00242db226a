import type { Sql } from '../db';
import { notFound } from '../errors';
import { pageOf, pagination } from '../http/pagination';
import { findList } from './lists';

interface ImportRow {
  id: string;
  list_id: string;
  status: 'importing' | 'completed' | 'failed';
  method: 'api' | 'manual';
  total_count: number;
  added_count: number;
  duplicate_count: number;
  malformed_count: number;
  created_at: Date;
  completed_at: Date | null;
}

const COLUMNS = [
  'id',
  'list_id',
  'status',
  'method',
  'total_count',
  'added_count',
  'duplicate_count',
  'malformed_count',
  'created_at',
  'completed_at',
];

export function toImport(r: ImportRow) {
  return {
    id: r.id,
    suppressionListId: r.list_id,
    status: r.status,
    method: r.method,
    totalCount: Number(r.total_count),
    addedCount: Number(r.added_count),
    duplicateCount: Number(r.duplicate_count),
    malformedCount: Number(r.malformed_count),
    createdAt: r.created_at.toISOString(),
    ...(r.completed_at !== null && { completedAt: r.completed_at.toISOString() }),
  };
}

/** A list's import history, newest first (the id breaks ties so pages are stable). */
export async function listImports(
  sql: Sql,
  accountId: string,
  listId: string,
  query: { page?: number; pageSize?: number },
) {
  await findList(sql, accountId, listId);
  const p = pageOf(query);
  const [rows, [count]] = await Promise.all([
    sql<ImportRow[]>`
      select ${sql(COLUMNS)} from suppression_imports
      where account_id = ${accountId} and list_id = ${listId}
      order by created_at desc, id desc
      limit ${p.pageSize} offset ${p.offset}`,
    sql<
      { n: number }[]
    >`select count(*)::int as n from suppression_imports where account_id = ${accountId} and list_id = ${listId}`,
  ]);
  return { data: rows.map(toImport), pagination: pagination(p, count!.n) };
}

export async function getImport(sql: Sql, accountId: string, listId: string, importId: string) {
  await findList(sql, accountId, listId);
  const [row] = await sql<ImportRow[]>`
    select ${sql(COLUMNS)} from suppression_imports
    where account_id = ${accountId} and list_id = ${listId} and id = ${importId}`;
  if (!row) throw notFound(`No import ${importId} on suppression list ${listId}.`);
  return toImport(row);
}

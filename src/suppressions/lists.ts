import type { Sql } from '../db';
import { notFound } from '../errors';
import { pageOf, pagination } from '../http/pagination';
import type { SUPPRESSION_SORTS } from './model';

export interface ListRow {
  id: string;
  name: string;
  format: 'plain text' | 'md5' | 'sha512';
  is_global: boolean;
  record_count: number;
  created_at: Date;
  updated_at: Date;
}

export function toList(r: ListRow) {
  return {
    id: r.id,
    name: r.name,
    format: r.format,
    isGlobal: r.is_global,
    recordCount: Number(r.record_count),
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
  };
}

/** A list of the account (offer-attached lists included: they are addressable by id). */
export async function findList(sql: Sql, accountId: string, listId: string): Promise<ListRow> {
  const [row] = await sql<ListRow[]>`
    select id, name, format, is_global, record_count, created_at, updated_at
    from suppression_lists where account_id = ${accountId} and id = ${listId}`;
  if (!row) throw notFound(`No suppression list ${listId} in this account.`);
  return row;
}

type Sort = (typeof SUPPRESSION_SORTS)[number];

export async function listLists(sql: Sql, accountId: string, query: { page?: number; pageSize?: number; sort?: Sort }) {
  const p = pageOf(query);
  const sort = query.sort ?? 'name';
  const desc = sort.startsWith('-');
  const key = { name: sql`lower(name)`, createdAt: sql`created_at`, updatedAt: sql`updated_at` }[
    sort.replace('-', '') as 'name' | 'createdAt' | 'updatedAt'
  ];
  // The id breaks ties so that pages are stable.
  const order = desc ? sql`${key} desc, id desc` : sql`${key}, id`;
  const [rows, [count]] = await Promise.all([
    sql<ListRow[]>`
      select id, name, format, is_global, record_count, created_at, updated_at
      from suppression_lists
      where account_id = ${accountId} and offer_id is null
      order by ${order}
      limit ${p.pageSize} offset ${p.offset}`,
    sql<
      { n: number }[]
    >`select count(*)::int as n from suppression_lists where account_id = ${accountId} and offer_id is null`,
  ]);
  return { data: rows.map(toList), pagination: pagination(p, count!.n) };
}

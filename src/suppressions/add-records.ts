import type { Sql } from '../db';
import { findList } from './lists';
import { finishImport, holdList, transaction, type Conn } from './bulk/list-guard';
import { recordsOrReject, rejectRepeats } from './records';

export interface AddRecordsResult {
  importId: string;
  totalCount: number;
  addedCount: number;
  duplicateCount: number;
}

/**
 * Adds a batch of records to a list as an `api` import. Order of checks: repeats as sent (400) →
 * the list (404) → every record against the list's format (400, all-or-nothing) → a running import
 * (409). Entries equal after normalisation, and entries already on the list, are duplicates.
 */
export async function addRecords(
  sql: Sql,
  accountId: string,
  listId: string,
  records: readonly string[],
): Promise<AddRecordsResult> {
  rejectRepeats(records);
  const list = await findList(sql, accountId, listId);
  const hex = recordsOrReject(list.format, records);
  return holdList(
    sql,
    {
      accountId,
      listId,
      method: 'api',
      estimatedSeconds: 1,
      describeFailure: () => 'The records could not be added; nothing was applied.',
    },
    (conn, importId) => transaction(conn, () => applyBatch(conn, accountId, listId, importId, hex)),
  );
}

async function applyBatch(
  conn: Conn,
  accountId: string,
  listId: string,
  importId: string,
  hex: string[],
): Promise<AddRecordsResult> {
  // One set-based insert; on conflict do nothing also absorbs entries repeated after normalisation.
  const [{ added } = { added: 0 }] = await conn<{ added: number }[]>`
    with added as (
      insert into suppression_records (account_id, list_id, value)
      select ${accountId}, ${listId}, decode(h, 'hex') from unnest(${conn.array(hex)}::text[]) as h
      on conflict do nothing
      returning 1
    )
    select count(*)::int as added from added`;
  await finishImport(conn, {
    accountId,
    listId,
    importId,
    totalCount: hex.length,
    addedCount: added,
    malformedCount: 0,
  });
  return { importId, totalCount: hex.length, addedCount: added, duplicateCount: hex.length - added };
}

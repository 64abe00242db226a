import { boundParams, compileFilter } from './compile';
import type { FilterNode } from './filter-types';

/** A composed statement for postgres.js `unsafe`: our SQL text, and every value as a parameter. */
export interface Statement {
  text: string;
  args: unknown[];
}

/** The columns GET /v1/contacts/{emailMd5} reads (write-sql.ts contactColumns), for a composed statement. */
const COLUMNS = 'c.email_md5, c.email, c.attributes, c.brand_ids, c.enabled, c.created_at';

/**
 * One page of a search: the account's contacts past `after` (an email_md5 as uuid) that pass the
 * filter, in the primary key's order, at most `limit`. Every condition names the account, so on a
 * Citus cluster the statement is one task on the account's node.
 */
export function pageStatement(
  accountId: string,
  node: FilterNode | undefined,
  after: string | undefined,
  limit: number,
): Statement {
  const p = boundParams(after ? 4 : 3);
  const where = node ? compileFilter(node, p) : 'true';
  return {
    text: `
      select ${COLUMNS} from contacts c
      where c.account_id = $1::uuid ${after ? 'and c.email_md5 > $3::uuid' : ''} and (${where})
      order by c.email_md5
      limit $2::int`,
    args: [accountId, limit, ...(after ? [after] : []), ...p.values],
  };
}

/** How many of the account's contacts pass the filter. */
export function countStatement(accountId: string, node: FilterNode | undefined): Statement {
  const p = boundParams(2);
  const where = node ? compileFilter(node, p) : 'true';
  return {
    text: `select count(*)::bigint as n from contacts c where c.account_id = $1::uuid and (${where})`,
    args: [accountId, ...p.values],
  };
}

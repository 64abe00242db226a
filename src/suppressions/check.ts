import type { Sql } from '../db';
import { isValidEmail, normaliseEmail } from '../contacts/email';
import { invalidRequest, pointer } from '../errors';

export interface SuppressionCheck {
  /** As sent. */
  email: string;
  suppressed: boolean;
  /** The lists that hold the address, in the order the lists were created. */
  suppressionListIds: string[];
}

/**
 * Which of the account's suppression lists hold each address: every list, global or not, offer-attached
 * or not, each by its format (plain text: the trimmed, lowercased address as add-records stores it; md5
 * and sha512: the digest of it). Answers in request order; a repeated address is answered in each place.
 * A 400 names every entry that is not an email address (the contract's one rule, src/contacts/email.ts).
 * @example await checkAddresses(sql, accountId, ['Ann@Example.com']) // [{ email: 'Ann@Example.com', … }]
 */
export async function checkAddresses(
  sql: Sql,
  accountId: string,
  emails: readonly string[],
): Promise<SuppressionCheck[]> {
  const normalised = addressesOrReject(emails);
  const distinct = [...new Set(normalised)];
  const at = new Map(distinct.map((a, i) => [a, i]));
  const hits = await listsHolding(sql, accountId, distinct);
  return normalised.map((a, i) => {
    const ids = hits[at.get(a)!] ?? [];
    return { email: emails[i]!, suppressed: ids.length > 0, suppressionListIds: ids };
  });
}

/** The normalised address of every entry, or a 400 with one `errors` entry per failing index. */
function addressesOrReject(emails: readonly string[]): string[] {
  const failed: number[] = [];
  const normalised = emails.map((e, i) => {
    if (!isValidEmail(e.trim())) failed.push(i);
    return normaliseEmail(e);
  });
  if (failed.length === 0) return normalised;
  const what =
    failed.length === 1 ? `The entry at index ${failed[0]} is` : `The entries at indexes ${failed.join(', ')} are`;
  throw invalidRequest(
    `${what} not an email address. Nothing was checked.`,
    failed.map((i) => ({ detail: `emails/${i} is not an email address.`, pointer: pointer('emails', i) })),
  );
}

/**
 * The list ids holding each address, by index into `addresses` (undefined: none). One statement: every
 * (address, list) pair is one probe of suppression_records' primary key, the value computed for the
 * list's format in SQL (md5() gives hex, sha512() bytea; the addresses are ASCII, so their UTF-8 is their
 * text). The probe is a lateral `limit 1` so that it stays a probe: as a join, a small account's lists
 * were hashed whole (300,000 records read for 1,000 addresses). account_id bound in both tables, which
 * Citus needs to route the lateral probe: one statement on the account's node.
 */
async function listsHolding(sql: Sql, accountId: string, addresses: string[]): Promise<string[][]> {
  const rows = await sql<{ ord: number; list_id: string }[]>`
    select i.ord::int as ord, l.id as list_id
    from suppression_lists l
    cross join unnest(${sql.array(addresses)}::text[]) with ordinality as i (address, ord)
    cross join lateral (
      select 1 from suppression_records r
      where r.account_id = ${accountId}
        and r.list_id = l.id
        and r.value = case l.format
          when 'md5' then decode(md5(i.address), 'hex')
          when 'sha512' then sha512(convert_to(i.address, 'UTF8'))
          else convert_to(i.address, 'UTF8')
        end
      limit 1
    ) as hit
    where l.account_id = ${accountId}
    order by l.created_at, l.id`;
  const hits: string[][] = [];
  for (const r of rows) (hits[r.ord - 1] ??= []).push(r.list_id);
  return hits;
}

import type postgres from 'postgres';
import type { AnySql } from '../db';
import type { AttributeChanges, Attributes } from './attributes';

/**
 * The SQL of the single-contact write rules, each spelled once. The plain path (service.ts,
 * store.ts, brands.ts) runs them as statements of its transaction; the fast path (fast-path.ts)
 * composes the same fragments into one statement, behind its `allowed` check. Conditions name their
 * tables rather than aliases, so they read the same in a where clause and in a join.
 */

type Fragment = postgres.Fragment;

/** A contact as `contactColumns` reads it. */
export interface ContactRow {
  email_md5: string;
  email: string;
  attributes: Attributes;
  brand_ids: string[];
  enabled: boolean;
  created_at: Date;
}

/** The columns of the response; the hidden fields (hard bounce, first source) are never read. */
export const contactColumns = (sql: AnySql) => sql`email_md5, email, attributes, brand_ids, enabled, created_at`;

/** Rows of `brands` that are live brands of the account among `ids`: deleted ones and other accounts' are not. */
export const liveBrandsAmong = (sql: AnySql, accountId: string, ids: readonly string[]) =>
  sql`brands.account_id = ${accountId} and brands.id = any(${sql.array([...ids])}::uuid[])
       and brands.deleted_at is null`;

/**
 * The account's seed address with this identity, if any: a seed's email never becomes a contact.
 * The fast path's create checks the same inside contact_write_admitted (sql/migrations/0018), which
 * on a cluster reads the reference table's copy on the node of the account's shards.
 */
export const seedAddressOf = (sql: AnySql, accountId: string, key: string) =>
  sql`seed_addresses.account_id = ${accountId} and seed_addresses.email_md5 = ${key}::uuid`;

export interface NewContact {
  /** As sent, trimmed. */
  email: string;
  /** md5 of the normalised address as the uuid the database stores. */
  key: string;
  attributes: Attributes;
  brandIds: readonly string[];
}

/**
 * A new contact from the API, returning its row, or no row when the email exists. `on conflict do
 * nothing` waits for a concurrent insert of the same email to commit, so of parallel creates
 * exactly one inserts. One VALUES row with the account as a constant: on Citus a statement Citus
 * routes to the account's node without distributed planning. `admitted`, from the fast path, is an
 * expression over the new row returned beside it, which raises when the fast path's checks refuse,
 * so that the statement writes nothing (fast-path.ts).
 */
export function insertContact(sql: AnySql, accountId: string, c: NewContact, admitted?: Fragment) {
  return sql<ContactRow[]>`
    insert into contacts (account_id, email_md5, email, attributes, brand_ids, first_source)
    values (${accountId}::uuid, ${c.key}::uuid, ${c.email}::text, ${sql.json(c.attributes)},
            ${sql.array([...c.brandIds])}::uuid[], 'api')
    on conflict (account_id, email_md5) do nothing
    returning ${contactColumns(sql)}${admitted ? sql`, ${admitted} as admitted` : sql``}`;
}

/**
 * The contact as insertContact would have made it from `c`, by the API, within the last `withinMs`
 * (plus a second), and not written since: a create sent again after its session was lost finds its
 * own first attempt so. Compared in PostgreSQL: jsonb equality ignores key order and number
 * spelling, the brands are compared as sets, and the times are the server's own.
 */
export function ownFirstAttempt(
  sql: AnySql,
  accountId: string,
  key: string,
  c: Pick<NewContact, 'attributes' | 'brandIds'>,
  withinMs: number,
) {
  const brandIds = sql.array([...c.brandIds]);
  return sql`
    select 1 from contacts
    where account_id = ${accountId}::uuid and email_md5 = ${key}::uuid
      and first_source = 'api' and enabled and updated_at = created_at
      and created_at > now() - make_interval(secs => ${(withinMs + 1000) / 1000}::float8)
      and attributes = ${sql.json(c.attributes)}
      and brand_ids @> ${brandIds}::uuid[] and brand_ids <@ ${brandIds}::uuid[]`;
}

/**
 * The brand-subscribe outbox of one write: one event per brand newly assigned, in the order sent,
 * each holding the set of contacts that got it, here the one contact. Written in the write's own
 * transaction after the contact's write, so an event exists exactly when its assignment committed.
 * The address is the contact's as stored, read here; selecting the account from the contact also
 * lets Citus send the statement whole to the account's node.
 */
export function brandSubscribeEvents(sql: AnySql, accountId: string, key: string, brandIds: readonly string[]) {
  return sql`
    insert into brand_subscribe_events (account_id, brand_id, email_md5s, emails, source)
    select c.account_id, u.b, array[c.email_md5], array[c.email], 'api'
    from contacts c
    cross join unnest(${sql.array([...brandIds])}::uuid[]) with ordinality as u(b, n)
    where c.account_id = ${accountId}::uuid and c.email_md5 = ${key}::uuid
    order by u.n`;
}

/**
 * PATCH's RFC 7386 merge patch as one expression over the stored value (`||` sets, `-` removes),
 * so concurrent patches of different attributes both survive without a read-modify-write. A
 * stored value that is not an object (a jsonb null, list or scalar written by other hands) holds
 * no attribute and counts as `{}`: `||` would make a list of it. The parentheses matter, since `-`
 * binds tighter than `||`.
 */
export const patchedAttributes = (sql: AnySql, { set, remove }: AttributeChanges) => sql`
  (case when jsonb_typeof(attributes) = 'object' then attributes else '{}'::jsonb end || ${sql.json(set)})
  - ${sql.array(remove)}::text[]`;

import { randomBytes } from 'node:crypto';
import { type Sql, accountXactLock, webhookEndpointsLock } from '../db';
import { conflict, invalidField, notFound } from '../errors';
import { pageOf, pagination } from '../http/pagination';
import { MAX_ENDPOINTS_PER_ACCOUNT, MAX_URL_LENGTH, type CreateEndpointInput } from './model';
import { checkWebhookUrl, type CheckOptions } from './url-safety';

/** The columns an endpoint shows; the secret is never one of them after creation. */
export interface EndpointRow {
  id: string;
  url: string;
  description: string | null;
  enabled: boolean;
  disabled_reason: string | null;
  created_at: Date;
}

export interface EndpointDeliveryRow extends EndpointRow {
  batch_id: string | null;
  next_attempt_at: Date;
  last_success_at: Date | null;
  last_failure_at: Date | null;
  last_failure_reason: string | null;
  failing_since: Date | null;
  pending_events: number;
}

/** An endpoint as the API shows it (lists, and the relay's logs could use it too). */
export function toEndpoint(row: EndpointRow) {
  return {
    id: row.id,
    url: row.url,
    ...(row.description !== null && { description: row.description }),
    enabled: row.enabled,
    ...(!row.enabled && row.disabled_reason !== null && { disabledReason: row.disabled_reason }),
    createdAt: row.created_at.toISOString(),
  };
}

export function toEndpointWithDelivery(row: EndpointDeliveryRow) {
  const iso = (d: Date | null) => d?.toISOString();
  const delivery = {
    pendingEvents: Number(row.pending_events),
    lastSuccessAt: iso(row.last_success_at),
    lastFailureAt: iso(row.last_failure_at),
    lastFailureReason: row.last_failure_reason ?? undefined,
    failingSince: iso(row.failing_since),
    // A retry is only ever scheduled for a batch in flight, and never for a disabled endpoint.
    nextAttemptAt: row.enabled && row.batch_id !== null ? iso(row.next_attempt_at) : undefined,
  };
  return {
    ...toEndpoint(row),
    delivery: Object.fromEntries(Object.entries(delivery).filter(([, v]) => v !== undefined)) as typeof delivery,
  };
}

/** `whsec_` + base64 of 32 random bytes: the Standard Webhooks secret format. */
export function newEndpointSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

// Text PostgreSQL cannot store as sent: NUL fails the statement, a lone surrogate would become U+FFFD.
const storable = (s: string) => !s.includes('\u0000') && s.isWellFormed();

export async function createEndpoint(
  sql: Sql,
  accountId: string,
  body: CreateEndpointInput,
  allowPrivateUrls: boolean,
  urlOptions?: CheckOptions,
) {
  const description = body.description ?? null;
  if (description !== null && !storable(description))
    throw invalidField('/description', 'description must not contain a NUL character or invalid Unicode.');
  const checked = await checkWebhookUrl(body.url, allowPrivateUrls, urlOptions);
  if (!checked.ok) throw invalidField('/url', checked.reason);
  // Normalising can lengthen a URL (percent-encoding, punycode): the stored form is bounded too.
  const url = checked.url.href;
  if (url.length > MAX_URL_LENGTH)
    throw invalidField('/url', `url must be at most ${MAX_URL_LENGTH} characters once normalised.`);
  const secret = newEndpointSecret();
  const row = await sql.begin(async (tx) => {
    // Two creates of one account count the endpoints one after the other, so the cap holds, whatever
    // node each is sent to. The lock is the account's own, held only for this insert.
    await accountXactLock(tx, accountId, webhookEndpointsLock(tx, accountId));
    // The endpoint starts right after its account's head, read in the insert, at (head + 1, 0): it
    // receives the events sequenced after it was made (a set sequenced meanwhile gets a higher position).
    const [inserted] = await tx<EndpointRow[]>`
      insert into webhook_endpoints (account_id, url, description, secret, delivered_position, delivered_index)
      select ${accountId}, ${url}, ${description}, ${secret},
        coalesce((select sequenced_through from event_feed_heads where account_id = ${accountId}), 0) + 1, 0
      where (select count(*) from webhook_endpoints where account_id = ${accountId}) < ${MAX_ENDPOINTS_PER_ACCOUNT}
      returning id, url, description, enabled, disabled_reason, created_at`;
    return inserted;
  });
  if (!row)
    throw conflict(
      `This account has ${MAX_ENDPOINTS_PER_ACCOUNT} webhook endpoints, the most it may have; delete one first.`,
    );
  return {
    id: row.id,
    url: row.url,
    ...(row.description !== null && { description: row.description }),
    enabled: true as const,
    secret,
    createdAt: row.created_at.toISOString(),
  };
}

export async function listEndpoints(sql: Sql, accountId: string, query: { page?: number; pageSize?: number }) {
  const p = pageOf(query);
  const rows = await sql<(EndpointRow & { total: number })[]>`
    select id, url, description, enabled, disabled_reason, created_at, count(*) over () as total
    from webhook_endpoints
    where account_id = ${accountId}
    order by created_at desc, id desc
    limit ${p.pageSize} offset ${p.offset}`;
  let total = rows[0]?.total;
  if (total === undefined) {
    // A page past the end returns no rows, yet totalCount still counts every endpoint.
    const [c] = await sql<{ n: number }[]>`
      select count(*)::int as n from webhook_endpoints where account_id = ${accountId}`;
    total = c!.n;
  }
  return { data: rows.map(toEndpoint), pagination: pagination(p, Number(total)) };
}

/**
 * Events pending for an endpoint: every event after its cursor (delivered_position, delivered_index),
 * the feed's (src/events/cursor.ts): the set at delivered_position from place delivered_index + 1 on,
 * and every later set. An erased address (a null in its set) is never delivered and does not count;
 * nor do sets not sequenced yet (position null), which are not in the feed.
 */
export async function getEndpoint(sql: Sql, accountId: string, endpointId: string) {
  const [row] = await sql<EndpointDeliveryRow[]>`
    select w.id, w.url, w.description, w.enabled, w.disabled_reason, w.created_at, w.batch_id, w.next_attempt_at,
      w.last_success_at, w.last_failure_at, w.last_failure_reason, w.failing_since,
      (select coalesce(sum(cardinality(array_remove(
           e.email_md5s[case when e.position = w.delivered_position then w.delivered_index else 0 end + 1 :],
           null))), 0)
         from brand_subscribe_events e
         where e.account_id = ${accountId} and e.position >= w.delivered_position) as pending_events
    from webhook_endpoints w
    where w.account_id = ${accountId} and w.id = ${endpointId}`;
  if (!row) throw notFound(`No webhook endpoint ${endpointId} in this account.`);
  return toEndpointWithDelivery(row);
}

export async function deleteEndpoint(sql: Sql, accountId: string, endpointId: string): Promise<void> {
  const rows = await sql`
    delete from webhook_endpoints where account_id = ${accountId} and id = ${endpointId} returning id`;
  if (rows.length === 0) throw notFound(`No webhook endpoint ${endpointId} in this account.`);
}

// Shared helpers of the contacts test files (test/contacts-*.test.ts).
import { createHash } from 'node:crypto';
import type { TestApp } from './helpers/app';

export const md5 = (email: string) => createHash('md5').update(email.trim().toLowerCase()).digest('hex');
export const hash = (algorithm: string, text: string) => createHash(algorithm).update(text).digest('hex');

/** Brand ids of the brand-subscribe events recorded for one contact, oldest first. */
export async function eventsOf(t: TestApp, email: string): Promise<string[]> {
  const rows = await t.db.sql<{ brand_id: string; source: string; import_id: string | null }[]>`
    select e.brand_id, e.source, e.import_id
    from brand_subscribe_events e cross join lateral unnest(e.email_md5s) as m(email_md5)
    where e.account_id = ${t.accountId} and m.email_md5 = ${md5ToUuid(md5(email))} order by e.id`;
  for (const r of rows) if (r.source !== 'api' || r.import_id !== null) throw new Error(`unexpected event source ${r.source}`);
  return rows.map((r) => r.brand_id);
}

/** The stored row, hidden fields included. */
export async function rowOf(t: TestApp, email: string) {
  const [row] = await t.db.sql<
    { email: string; attributes: Record<string, unknown>; brand_ids: string[]; enabled: boolean; created_at: Date; hard_bounced: boolean; hard_bounced_at: Date | null; first_source: string; first_import_id: string | null; first_import_method: string | null }[]
  >`select * from contacts where account_id = ${t.accountId} and email_md5 = ${md5ToUuid(md5(email))}`;
  return row;
}

export function md5ToUuid(h: string): string {
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Creates a contact through the API and asserts it was created. */
export async function create(t: TestApp, body: Record<string, unknown>) {
  const res = await t.call('POST', '/v1/contacts', { body });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export async function disable(t: TestApp, email: string) {
  const res = await t.call('POST', `/v1/contacts/${md5(email)}/disable`);
  if (res.status !== 200 || res.body.enabled !== false) throw new Error(`disable failed: ${res.status} ${JSON.stringify(res.body)}`);
}

/** A running bulk operation of the account, as an import or `attribute create` would record it. */
export async function startBulkOperation(t: TestApp, kind: 'contact-import' | 'schema-change', secondsLeft: number): Promise<() => Promise<void>> {
  const id = crypto.randomUUID();
  await t.db.sql`insert into bulk_operations (account_id, id, kind, estimated_end)
                 values (${t.accountId}, ${id}, ${kind}, now() + make_interval(secs => ${secondsLeft}))`;
  return async () => {
    await t.db.sql`delete from bulk_operations where account_id = ${t.accountId} and id = ${id}`;
  };
}

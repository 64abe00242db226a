// Shared helpers of the contacts test files (test/contacts-*.test.ts).
import { expect } from 'bun:test';
import { createHash } from 'node:crypto';
import { testApp, type TestApp } from '../helpers/app';

export const md5 = (email: string) => createHash('md5').update(email.trim().toLowerCase()).digest('hex');
export const hash = (algorithm: string, text: string) => createHash(algorithm).update(text).digest('hex');

/** Brand ids of the brand-subscribe events recorded for one contact, oldest first. */
export async function eventsOf(t: TestApp, email: string): Promise<string[]> {
  const rows = await t.db.sql<{ brand_id: string; source: string; import_id: string | null }[]>`
    select e.brand_id, e.source, e.import_id
    from brand_subscribe_events e cross join lateral unnest(e.email_md5s) as m(email_md5)
    where e.account_id = ${t.accountId} and m.email_md5 = ${md5ToUuid(md5(email))}
    order by e.created_at, e.id`;
  for (const r of rows)
    if (r.source !== 'api' || r.import_id !== null) throw new Error(`unexpected event source ${r.source}`);
  return rows.map((r) => r.brand_id);
}

/** The stored row, hidden fields included. */
export async function rowOf(t: TestApp, email: string) {
  const [row] = await t.db.sql<
    {
      email: string;
      attributes: Record<string, unknown>;
      brand_ids: string[];
      enabled: boolean;
      created_at: Date;
      hard_bounced: boolean;
      hard_bounced_at: Date | null;
      first_source: string;
      first_import_id: string | null;
      first_import_method: string | null;
    }[]
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
  if (res.status !== 200 || res.body.enabled !== false)
    throw new Error(`disable failed: ${res.status} ${JSON.stringify(res.body)}`);
}

/** A running bulk operation of the account, as an import or `attribute create` would record it. */
export async function startBulkOperation(
  t: TestApp,
  kind: 'contact-import' | 'schema-change',
  secondsLeft: number,
): Promise<() => Promise<void>> {
  const id = crypto.randomUUID();
  await t.db.sql`insert into bulk_operations (account_id, id, kind, estimated_end)
                 values (${t.accountId}, ${id}, ${kind}, now() + make_interval(secs => ${secondsLeft}))`;
  return async () => {
    await t.db.sql`delete from bulk_operations where account_id = ${t.accountId} and id = ${id}`;
  };
}

/**
 * The two ways the API serves a contact request, and every contact test file runs on both: warm
 * tries the one-statement fast path first (src/contacts/fast-path.ts), cold never does
 * (CONTACT_FAST_PATH=false), so the plain path is tested on what the fast path would have answered.
 */
export const CONTACT_PATHS = ['warm', 'cold'] as const;
export type ContactPath = (typeof CONTACT_PATHS)[number];

export interface ContactTestApp extends TestApp {
  path: ContactPath;
  /** Every statement the app sent, in order. */
  sent: string[];
}

export async function contactTestApp(path: ContactPath): Promise<ContactTestApp> {
  const sent: string[] = [];
  const t = await testApp({}, { CONTACT_FAST_PATH: String(path === 'warm') }, (query) => sent.push(query));
  return { ...t, path, sent };
}

/**
 * The request a statement of the fast path serves, or undefined for any other statement: only the
 * fast path reads or checks the cache counters in the statement that reads or writes a contact
 * (sql/migrations/0018_static_write_checks.sql).
 */
function fastPathRequest(query: string): 'GET' | 'POST' | 'PATCH' | undefined {
  if (query.includes('contact_create_admitted(')) return query.includes('insert into contacts') ? 'POST' : undefined;
  if (query.includes('contact_write_admitted(')) return query.includes('update contacts') ? 'PATCH' : undefined;
  return /contact_versions\(account_id\)[\s\S]*from contacts/.test(query) ? 'GET' : undefined;
}

/** Calls the app; `sent` is what it sent to the database for this request. */
async function counted(t: ContactTestApp, method: string, path: string, body?: unknown) {
  const from = t.sent.length;
  const res = await t.call(method, path, { body });
  return { ...res, sent: t.sent.slice(from) };
}

/**
 * Asserts the file's requests took its path. Warm: they reached the fast path, and once the key and
 * the schema are cached, a POST of a new email, a PATCH and a GET are each answered by one
 * statement of it alone. Cold: no statement of the fast path was ever sent.
 */
export async function expectContactPath(t: ContactTestApp): Promise<void> {
  const reached = t.sent.filter(fastPathRequest).length;
  const email = `path.${crypto.randomUUID()}@example.com`;
  await create(t, { email });
  const contact = `/v1/contacts/${md5(email)}`;
  if (t.path === 'cold') {
    expect((await t.call('PATCH', contact, { body: { attributes: {} } })).status).toBe(200);
    expect((await t.call('GET', contact)).status).toBe(200);
    expect(t.sent.filter(fastPathRequest).length).toBe(0);
    return;
  }
  expect(reached).toBeGreaterThan(0);
  // The caches fill once the invalidation listener is up (src/auth/cache.ts).
  for (let i = 0; i < 100 && (await counted(t, 'GET', contact)).sent.length > 1; i++) await Bun.sleep(20);
  const post = await counted(t, 'POST', '/v1/contacts', { email: `path.${crypto.randomUUID()}@example.com` });
  const patch = await counted(t, 'PATCH', contact, { attributes: {} });
  const get = await counted(t, 'GET', contact);
  expect([post.status, patch.status, get.status]).toEqual([201, 200, 200]);
  const served = [post.sent, patch.sent, get.sent].map((sent) => sent.map(fastPathRequest));
  expect(served).toEqual([['POST'], ['PATCH'], ['GET']]);
}

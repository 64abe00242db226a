// Erasure, the right to be forgotten (issue 37): DELETE /v1/contacts/{emailMd5} and
// POST /v1/contact-erasures. The contact goes whole, its address leaves the recorded events (feed and
// webhooks), the erasure is recorded for the operator, and a later create makes a new contact.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mergedRanges } from '../../src/events/erase';
import { sequenceEvents } from '../../worker/events/sequencer';
import { runNextExport } from '../../worker/exports/loop';
import { runImport } from '../../worker/import/index';
import { runAdmin } from '../helpers/admin-cli';
import { expectProblem, testApp, type TestApp } from '../helpers/app';
import { stageImport, tempStore, testConfig } from '../helpers/file-store';
import { createAccount, createBrand, createKey } from '../helpers/fixtures';
import { md5, md5ToUuid, rowOf, startBulkOperation } from './contacts-support';

let t: TestApp;
let files: Awaited<ReturnType<typeof tempStore>>;
let brand: string;
let n = 0;

beforeAll(async () => {
  files = await tempStore();
  t = await testApp({ storage: files.store } as never);
  brand = await createBrand(t.db.sql, t.accountId, 'Erasure brand');
});
afterAll(async () => {
  await t.close();
  await files.remove();
});

const fresh = (tag = 'e') => `${tag}.${++n}@example.com`;

async function create(email: string, brandIds: string[] = [brand], key?: string) {
  const res = await t.call('POST', '/v1/contacts', { key, body: { email, brandIds, attributes: {} } });
  if (res.status !== 201) throw new Error(`create ${email}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Every event of the account's feed, as (email, emailMd5) pairs, in feed order. */
async function feedOf(key: string) {
  await sequenceEvents(t.db.sql);
  const seen: { email: string; emailMd5: string; brandId: string }[] = [];
  let after = '';
  for (;;) {
    const res = await t.call('GET', `/v1/events?limit=1000${after && `&after=${after}`}`, { key });
    expect(res.status).toBe(200);
    if (res.body.data.length === 0) return seen;
    for (const e of res.body.data)
      seen.push({ email: e.data.email, emailMd5: e.data.emailMd5, brandId: e.data.brandId });
    after = res.body.next;
  }
}

/**
 * The stored form: an erased event is a null at the same place of both arrays, never one without the
 * other. The nulls are found in SQL: postgres.js reads a NULL element of a text[] as the text "NULL".
 */
async function storedSets(accountId: string) {
  const sets = await t.db.sql<{ emails: string[]; md5s: string[]; null_emails: number[]; null_md5s: number[] }[]>`
    select array_remove(emails, null) as emails, array_remove(email_md5s, null)::text[] as md5s,
      array(select i from generate_subscripts(emails, 1) i where emails[i] is null) as null_emails,
      array(select i from generate_subscripts(email_md5s, 1) i where email_md5s[i] is null) as null_md5s
    from brand_subscribe_events where account_id = ${accountId} order by id`;
  for (const s of sets) expect(s.null_emails).toEqual(s.null_md5s);
  return sets;
}

describe('DELETE /v1/contacts/{emailMd5}', () => {
  test('204; GET and the brand list then 404, the row and its hidden fields gone; a create is 201 anew', async () => {
    const email = fresh();
    const first = await create(email);
    await Bun.sleep(5);
    const res = await t.call('DELETE', `/v1/contacts/${md5(email).toUpperCase()}`);
    expect(res.status).toBe(204);
    expect(res.body).toBeUndefined();
    expectProblem(await t.call('GET', `/v1/contacts/${md5(email)}`), 404, 'not_found_error');
    expectProblem(await t.call('GET', `/v1/contacts/${md5(email)}/brands`), 404, 'not_found_error');
    expect(await rowOf(t, email)).toBeUndefined();
    expectProblem(await t.call('DELETE', `/v1/contacts/${md5(email)}`), 404, 'not_found_error');

    const again = await t.call('POST', '/v1/contacts', { body: { email, attributes: {} } });
    expect(again.status).toBe(201);
    expect(again.body.brandIds).toEqual([]);
    expect(again.body.createdAt > first.createdAt).toBe(true);
  });

  test('404 for no such contact; 400 for a malformed emailMd5; another account cannot erase it', async () => {
    expectProblem(await t.call('DELETE', `/v1/contacts/${md5(fresh())}`), 404, 'not_found_error');
    const bad = expectProblem(await t.call('DELETE', '/v1/contacts/not-an-md5'), 400, 'invalid_request_error');
    expect(JSON.stringify(bad)).toContain('emailMd5');
    const email = fresh();
    await create(email);
    const other = await createAccount(t.db.sql);
    const otherKey = await createKey(t.db.sql, other);
    expectProblem(await t.call('DELETE', `/v1/contacts/${md5(email)}`, { key: otherKey }), 404, 'not_found_error');
    expect(await rowOf(t, email)).toBeDefined();
  });

  test('403 without contacts:write; 401 without a key; nothing erased', async () => {
    const email = fresh();
    await create(email);
    const reader = await createKey(t.db.sql, t.accountId, ['contacts:read']);
    expectProblem(await t.call('DELETE', `/v1/contacts/${md5(email)}`, { key: reader }), 403, 'permission_error');
    expectProblem(await t.call('DELETE', `/v1/contacts/${md5(email)}`, { key: null }), 401, 'authentication_error');
    expect(await rowOf(t, email)).toBeDefined();
  });

  test('409 operation_in_progress with Retry-After while a bulk operation or schema change runs; kept', async () => {
    const email = fresh();
    await create(email);
    for (const kind of ['contact-import', 'schema-change'] as const) {
      const end = await startBulkOperation(t, kind, 30);
      try {
        const res = await t.call('DELETE', `/v1/contacts/${md5(email)}`);
        expectProblem(res, 409, 'operation_in_progress');
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        const many = await t.call('POST', '/v1/contact-erasures', { body: { emailMd5s: [md5(email)] } });
        expectProblem(many, 409, 'operation_in_progress');
        expect(Number(many.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      } finally {
        await end();
      }
      expect(await rowOf(t, email)).toBeDefined();
    }
    expect((await t.call('DELETE', `/v1/contacts/${md5(email)}`)).status).toBe(204);
  });

  test('the deprecated /subscriptions paths are unchanged: removing a brand is not an erasure', async () => {
    const email = fresh();
    await create(email);
    const res = await t.call('DELETE', `/v1/contacts/${md5(email)}/subscriptions/${brand}`);
    expect(res.status).toBe(204);
    expect((await rowOf(t, email))?.brand_ids).toEqual([]);
  });
});

describe('POST /v1/contact-erasures', () => {
  test('200 with the counts; uppercase hex accepted; the found are gone, the rest untouched', async () => {
    const a = fresh();
    const b = fresh();
    const kept = fresh();
    await Promise.all([create(a), create(b), create(kept)]);
    const res = await t.call('POST', '/v1/contact-erasures', {
      body: { emailMd5s: [md5(a), md5(fresh()).toUpperCase(), md5(b).toUpperCase()] },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ erasedCount: 2, notFoundCount: 1 });
    expect(await rowOf(t, a)).toBeUndefined();
    expect(await rowOf(t, b)).toBeUndefined();
    expect(await rowOf(t, kept)).toBeDefined();
    const none = await t.call('POST', '/v1/contact-erasures', { body: { emailMd5s: [md5(a)] } });
    expect(none.body).toEqual({ erasedCount: 0, notFoundCount: 1 });
  });

  test('400 with the pointer of a malformed entry or a repeat (any case), or of the list; nothing erased', async () => {
    const email = fresh();
    await create(email);
    const bad = async (body: unknown, pointer: string) => {
      const problem = expectProblem(
        await t.call('POST', '/v1/contact-erasures', { body }),
        400,
        'invalid_request_error',
      );
      expect(problem.errors?.map((e: { pointer?: string }) => e.pointer)).toContain(pointer);
    };
    await bad({ emailMd5s: [md5(email), 'xyz'] }, '/emailMd5s/1');
    await bad({ emailMd5s: [md5(email), 42] }, '/emailMd5s/1');
    await bad({ emailMd5s: [md5(fresh()), md5(email), md5(email).toUpperCase()] }, '/emailMd5s/2');
    await bad({ emailMd5s: [] }, '/emailMd5s');
    await bad({ emailMd5s: Array.from({ length: 1001 }, () => md5(fresh())) }, '/emailMd5s');
    await bad({ emailMd5s: md5(email) }, '/emailMd5s');
    await bad({}, '/emailMd5s');
    const unknown = expectProblem(
      await t.call('POST', '/v1/contact-erasures', { body: { emailMd5s: [md5(email)], hard: true } }),
      400,
      'invalid_request_error',
    );
    expect(JSON.stringify(unknown)).toContain('hard');
    expect(await rowOf(t, email)).toBeDefined();
  });

  test('1000 at once: all erased in one request', async () => {
    const emails = Array.from({ length: 1000 }, () => fresh('bulk'));
    await t.db.sql`
      insert into contacts (account_id, email_md5, email, first_source)
      select ${t.accountId}, md5(e)::uuid, e, 'api' from unnest(${t.db.sql.array(emails)}::text[]) e`;
    const res = await t.call('POST', '/v1/contact-erasures', { body: { emailMd5s: emails.map(md5) } });
    expect(res.body).toEqual({ erasedCount: 1000, notFoundCount: 0 });
    const [left] = await t.db.sql`
      select count(*)::int as n from contacts
      where account_id = ${t.accountId} and email = any(${t.db.sql.array(emails)}::text[])`;
    expect(left!.n).toBe(0);
  });
});

describe('the recorded events', () => {
  test("an erased contact leaves the feed, also from an import's set of many; others stay, in order", async () => {
    const accountId = await createAccount(t.db.sql);
    const key = await createKey(t.db.sql, accountId);
    const b1 = await createBrand(t.db.sql, accountId, 'One');
    const b2 = await createBrand(t.db.sql, accountId, 'Two');
    const call = (method: string, path: string, body?: unknown) => t.call(method, path, { key, body });
    const byApi = fresh('api');
    expect((await call('POST', '/v1/contacts', { email: byApi, brandIds: [b1, b2] })).status).toBe(201);
    const imported = Array.from({ length: 12 }, () => fresh('imp'));
    const csv = `Email\n${imported.join('\n')}\n`;
    const id = await stageImport(t.db.sql, files.store, accountId, csv, { columns: ['Email'], brandIds: [b1] });
    await runImport({ sql: t.db.sql, storage: files.store, config: testConfig(5) }, accountId, id);
    const before = await feedOf(key);
    expect(before).toHaveLength(2 + 12);

    const gone = [byApi, imported[0]!, imported[6]!, imported[11]!];
    expect((await call('DELETE', `/v1/contacts/${md5(gone[0]!)}`)).status).toBe(204);
    const many = await call('POST', '/v1/contact-erasures', { emailMd5s: gone.slice(1).map(md5) });
    expect(many.body).toEqual({ erasedCount: 3, notFoundCount: 0 });

    const after = await feedOf(key);
    expect(after).toEqual(before.filter((e) => !gone.includes(e.email)));
    const sets = await storedSets(accountId);
    expect(sets.reduce((erased, s) => erased + s.null_emails.length, 0)).toBe(1 * 2 + 3);
    for (const s of sets) {
      expect(s.emails.filter((e) => gone.includes(e))).toEqual([]);
      expect(s.md5s.filter((m) => gone.map((g) => md5ToUuid(md5(g))).includes(m))).toEqual([]);
    }

    // A new contact of an erased address has events of its own.
    expect((await call('POST', '/v1/contacts', { email: byApi, brandIds: [b2] })).status).toBe(201);
    const latest = await feedOf(key);
    expect(latest.at(-1)).toMatchObject({ email: byApi, brandId: b2 });
    expect(latest.filter((e) => e.email === byApi)).toHaveLength(1);
  });

  test('concurrent erasures in one set all hold: none writes back an address another took out', async () => {
    const accountId = await createAccount(t.db.sql);
    const key = await createKey(t.db.sql, accountId);
    const b = await createBrand(t.db.sql, accountId, 'Set');
    const emails = Array.from({ length: 40 }, () => fresh('set'));
    const id = await stageImport(t.db.sql, files.store, accountId, `Email\n${emails.join('\n')}\n`, {
      columns: ['Email'],
      brandIds: [b],
    });
    await runImport({ sql: t.db.sql, storage: files.store, config: testConfig(1000) }, accountId, id);
    const gone = emails.filter((_, i) => i % 2 === 0);
    const statuses = await Promise.all(
      gone.map((e) => t.call('DELETE', `/v1/contacts/${md5(e)}`, { key }).then((r) => r.status)),
    );
    expect(statuses).toEqual(gone.map(() => 204));
    const sets = await storedSets(accountId);
    expect(Math.max(...sets.map((s) => s.null_emails.length))).toBeGreaterThan(5); // many erasures per set
    expect(sets.flatMap((s) => s.emails).sort()).toEqual(emails.filter((_, i) => i % 2).sort());
    expect((await feedOf(key)).map((e) => e.email).sort()).toEqual(emails.filter((_, i) => i % 2).sort());
  });

  test('a contact older than its events window: sets outside it are not read, and those inside are', async () => {
    const accountId = await createAccount(t.db.sql);
    const key = await createKey(t.db.sql, accountId);
    const b = await createBrand(t.db.sql, accountId, 'Old');
    const email = fresh('old');
    expect((await t.call('POST', '/v1/contacts', { key, body: { email, brandIds: [b] } })).status).toBe(201);
    // Brands assigned later move updated_at: the window reaches the later set too.
    await Bun.sleep(20);
    const b2 = await createBrand(t.db.sql, accountId, 'Later');
    expect((await t.call('POST', `/v1/contacts/${md5(email)}/brands`, { key, body: { brandIds: [b2] } })).status).toBe(
      200,
    );
    expect((await feedOf(key)).map((e) => e.brandId)).toEqual([b, b2]);
    expect((await t.call('DELETE', `/v1/contacts/${md5(email)}`, { key })).status).toBe(204);
    expect(await feedOf(key)).toEqual([]);
  });
});

test('the ranges of sets read: one per contact, overlapping ones merged, apart ones kept apart', () => {
  expect(mergedRanges([])).toEqual([]);
  expect(
    mergedRanges([
      [50, 60],
      [10, 20],
      [15, 30],
      [30, 31],
      [40, 45],
    ]),
  ).toEqual([
    [10, 31],
    [40, 45],
    [50, 60],
  ]);
});

test('an erased contact is absent from GET, a later export and the feed; a create after it is 201', async () => {
  const accountId = await createAccount(t.db.sql);
  const key = await createKey(t.db.sql, accountId);
  const b = await createBrand(t.db.sql, accountId, 'Later export');
  const [gone, kept] = [fresh('x'), fresh('x')];
  for (const email of [gone, kept])
    expect((await t.call('POST', '/v1/contacts', { key, body: { email, brandIds: [b] } })).status).toBe(201);
  expect((await t.call('DELETE', `/v1/contacts/${md5(gone)}`, { key })).status).toBe(204);
  expectProblem(await t.call('GET', `/v1/contacts/${md5(gone)}`, { key }), 404, 'not_found_error');

  const created = await t.call('POST', '/v1/contact-exports', { key, body: { columns: ['Email'] } });
  expect(created.status).toBe(202);
  expect(await runNextExport(t.db.sql, files.store, crypto.randomUUID(), 7)).toBe('success');
  const done = await t.call('GET', `/v1/contact-exports/${created.body.id}`, { key });
  expect(done.body).toMatchObject({ status: 'success', rowCount: 1 });
  const file = await t.app.handle(new Request(`http://localhost${new URL(done.body.downloadUrl).pathname}`));
  expect(await file.text()).toBe(`Email\n${kept}\n`);
  expect((await feedOf(key)).map((e) => e.email)).toEqual([kept]);

  expect((await t.call('POST', '/v1/contacts', { key, body: { email: gone } })).status).toBe(201);
});

describe('the record for the operator', () => {
  test('each erasure: account, emailMd5, key id and time, never the address; `admin erasures` lists them', async () => {
    const accountId = await createAccount(t.db.sql);
    const key = await createKey(t.db.sql, accountId);
    const [keyRow] = await t.db.sql<{ id: string }[]>`select id from api_keys where account_id = ${accountId}`;
    const a = fresh('rec');
    const b = fresh('rec');
    for (const email of [a, b])
      expect((await t.call('POST', '/v1/contacts', { key, body: { email } })).status).toBe(201);
    expect((await t.call('DELETE', `/v1/contacts/${md5(a)}`, { key })).status).toBe(204);
    expect(
      (await t.call('POST', '/v1/contact-erasures', { key, body: { emailMd5s: [md5(b), md5(fresh())] } })).body,
    ).toEqual({ erasedCount: 1, notFoundCount: 1 });

    const stored = await t.db.sql`select * from contact_erasures where account_id = ${accountId} order by id`;
    expect(JSON.stringify(stored)).not.toContain('@');

    const run = await runAdmin(t.db.url, ['erasures', '--account', accountId]);
    expect(run.code).toBe(0);
    const out = JSON.parse(run.out);
    expect(out.accountId).toBe(accountId);
    expect(out.erasures.map((e: { emailMd5: string }) => e.emailMd5)).toEqual([md5(a), md5(b)]);
    for (const e of out.erasures) {
      expect(e.keyId).toBe(keyRow!.id);
      expect(Date.now() - Date.parse(e.erasedAt)).toBeLessThan(60_000);
    }
    expect(run.out).not.toContain('@');

    const one = JSON.parse((await runAdmin(t.db.url, ['erasures', '--account', accountId, '--email-md5', md5(b)])).out);
    expect(one.erasures.map((e: { emailMd5: string }) => e.emailMd5)).toEqual([md5(b)]);
    const usage = await runAdmin(t.db.url, ['erasures', '--account', accountId, '--email-md5', 'nope']);
    expect(usage.code).toBe(2);
    expect(usage.err).toContain('--email-md5');
  });
});

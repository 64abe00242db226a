// Suspension means suspended (issue 60, item 3; docs/admin-cli.md, "Suspended accounts"): what an
// account was given or started before its suspension is refused or waits while it lasts, and works
// again once it is unsuspended.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Server } from 'bun';
import { cacheChanged } from '../../src/auth/cache';
import type { Sql } from '../../src/db';
import { importObjectKey } from '../../src/storage';
import { LocalStore } from '../../src/storage/local';
import { checkWebhookUrl } from '../../src/webhooks/url-safety';
import { runLoop } from '../../worker/events/loop';
import { startRelay } from '../../worker/events/relay';
import { sequenceEvents } from '../../worker/events/sequencer';
import { runNextExport } from '../../worker/exports/loop';
import { runImport, type ImportDeps } from '../../worker/import/index';
import { runAdmin } from '../helpers/admin-cli';
import { expectProblem } from '../helpers/app';
import { importRow, stageImport, testConfig } from '../helpers/file-store';
import { createAccount, createBrand, createKey, revokeKey, suspendAccount } from '../helpers/fixtures';
import { uploadBed } from '../helpers/upload-bed';

const bed = uploadBed('suspension');
const sql = (): Sql => bed.t.db.sql;
const exportToken = crypto.randomUUID();

/** Unsuspends as the admin CLI does: suspended_at cleared, with cache_changed in the transaction. */
async function unsuspend(accountId: string): Promise<void> {
  await sql().begin(async (tx) => {
    await tx`update accounts set suspended_at = null where id = ${accountId}`;
    await cacheChanged(tx, accountId, 'accounts');
  });
}

/** A fresh account with a full-scope key and a brand: each test suspends its own. */
async function account() {
  const id = await createAccount(sql(), 'Suspendable');
  const key = await createKey(sql(), id);
  const brand = await createBrand(sql(), id, 'Brand');
  return { id, key, brand };
}

const call = (method: string, path: string, key: string, body?: unknown) =>
  bed.t.call(method, path, { key, ...(body !== undefined && { body }) });

/** GETs a link the API handed out (the local store's links are the API's own routes), without a key. */
const follow = (url: string) => bed.t.app.handle(new Request(`http://localhost${new URL(url).pathname}`));

async function expectXml(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/xml');
  expect(await res.text()).toContain(`<Error><Code>${code}</Code><Message>The account is suspended.</Message>`);
}

const importDeps = (extra: Partial<ImportDeps> = {}): ImportDeps => ({
  sql: sql(),
  storage: bed.store,
  config: testConfig(100),
  ...extra,
});

const contactCount = async (accountId: string) =>
  Number((await sql()`select count(*) as n from contacts where account_id = ${accountId}`)[0]!.n);

describe('account suspend and unsuspend (admin CLI)', () => {
  test('suspend refuses the keys at once; unsuspend restores them at once', async () => {
    const a = await account();
    const admin = async (...args: string[]) => {
      const r = await runAdmin(bed.t.db.url, args);
      expect(r.code).toBe(0);
      return JSON.parse(r.out);
    };
    expect((await call('GET', '/v1/brands', a.key)).status).toBe(200);
    expect(await admin('account', 'suspend', '--account', a.id)).toEqual({ id: a.id, suspended: true });
    expectProblem(await call('GET', '/v1/brands', a.key), 403, 'permission_error');
    expect(await admin('account', 'unsuspend', '--account', a.id)).toEqual({ id: a.id, suspended: false });
    expect((await call('GET', '/v1/brands', a.key)).status).toBe(200);
    const [row] = await sql()`select suspended_at from accounts where id = ${a.id}`;
    expect(row!.suspended_at).toBeNull();
  });

  test('unsuspend of an unknown account fails with a message; import refuses a suspended account', async () => {
    const nobody = crypto.randomUUID();
    const r = await runAdmin(bed.t.db.url, ['account', 'unsuspend', '--account', nobody]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`no account ${nobody}`);
    const a = await account();
    await suspendAccount(sql(), a.id);
    const file = `${bed.dir}/admin-import.csv`;
    await Bun.write(file, 'Email\nadmin@example.com\n');
    const refused = await runAdmin(bed.t.db.url, ['import', '--account', a.id, '--file', file, '--strategy', 'skip']);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('is suspended');
    expect(await sql()`select 1 from contact_imports where account_id = ${a.id}`).toHaveLength(0);
  });
});

describe('download links of contact exports', () => {
  test('a link handed out before is 403 permission_error while suspended, and serves again after', async () => {
    const a = await account();
    await call('POST', '/v1/contacts', a.key, { email: 'd@example.com' });
    const created = await call('POST', '/v1/contact-exports', a.key, {});
    expect(created.status).toBe(202);
    expect(await runNextExport(sql(), bed.store, exportToken, 7)).toBe('success');
    const { downloadUrl } = (await call('GET', `/v1/contact-exports/${created.body.id}`, a.key)).body;
    expect((await follow(downloadUrl)).status).toBe(200);

    await suspendAccount(sql(), a.id);
    const refused = await follow(downloadUrl);
    const body = expectProblem(
      { status: refused.status, headers: refused.headers, body: await refused.json() },
      403,
      'permission_error',
    );
    expect(body.detail).toBe('The account is suspended.');

    await unsuspend(a.id);
    const served = await follow(downloadUrl);
    expect(served.status).toBe(200);
    expect(await served.text()).toContain('d@example.com');
  });
});

describe('upload links', () => {
  test("S3's AccessDenied while suspended, nothing stored; the same link takes the file after", async () => {
    const a = await account();
    const created = await call('POST', '/v1/contact-imports', a.key, {
      columns: ['Email'],
      duplicateContactStrategy: 'overwrite',
    });
    expect(created.status).toBe(201);
    const { id, uploadUrl } = created.body;
    const put = () => bed.put(new Request(uploadUrl, { method: 'PUT', body: 'Email\nu@example.com\n' }));

    await suspendAccount(sql(), a.id);
    await expectXml(await put(), 403, 'AccessDenied');
    expect((await importRow(sql(), a.id, id)).status).toBe('awaiting-upload');
    expect(await bed.store.head(importObjectKey(a.id, id))).toBeUndefined();
    expect(bed.enqueued).not.toContain(id);

    await unsuspend(a.id);
    expect((await put()).status).toBe(200);
    expect((await importRow(sql(), a.id, id)).status).toBe('uploaded');
    expect(bed.enqueued).toContain(id);
  });
});

describe('imports', () => {
  test('an uploaded import does not start while suspended; once unsuspended it runs', async () => {
    const a = await account();
    const id = await stageImport(sql(), bed.store, a.id, 'Email\nq1@example.com\nq2@example.com\n', {
      columns: ['Email'],
    });
    await suspendAccount(sql(), a.id);
    expect(await runImport(importDeps(), a.id, id)).toBe('suspended');
    expect((await importRow(sql(), a.id, id)).status).toBe('uploaded');
    expect(await contactCount(a.id)).toBe(0);

    await unsuspend(a.id);
    expect(await runImport(importDeps(), a.id, id)).toBe('ended');
    expect((await importRow(sql(), a.id, id)).status).toBe('success');
    expect(await contactCount(a.id)).toBe(2);
  });

  test('a running import stops at a checkpoint, stays importing, and resumes from there once unsuspended', async () => {
    const a = await account();
    const rows = 300;
    const csv = `Email\n${Array.from({ length: rows }, (_, i) => `run${i}@example.com`).join('\n')}\n`;
    const id = await stageImport(sql(), bed.store, a.id, csv, { columns: ['Email'] });
    // Suspended mid-merge: the run is asked whether to give way between phases and then between
    // merge batches (of 2 rows here); the tenth time is well inside the merge's 150 batches.
    let asked = 0;
    let suspension: Promise<void> | undefined;
    const deps = importDeps({
      config: testConfig(2),
      suspensionLookMs: 5,
      giveWay: () => {
        if (++asked === 10) suspension = suspendAccount(sql(), a.id);
        return false;
      },
    });
    expect(await runImport(deps, a.id, id)).toBe('suspended');
    await suspension;
    const stopped = await importRow(sql(), a.id, id);
    expect(stopped.status).toBe('importing');
    const written = await contactCount(a.id);
    expect(written).toBeGreaterThan(0);
    expect(written).toBeLessThan(rows);
    // It waits while suspended: a run taken up again does nothing.
    expect(await runImport(importDeps(), a.id, id)).toBe('suspended');
    expect(await contactCount(a.id)).toBe(written);

    await unsuspend(a.id);
    expect(await runImport(importDeps({ config: testConfig(2) }), a.id, id)).toBe('ended');
    const done = await importRow(sql(), a.id, id);
    expect(done.status).toBe('success');
    expect(await contactCount(a.id)).toBe(rows);
    expect(done.addedCount).toBe(rows);
  });
});

describe('contact exports', () => {
  test('a queued export waits while suspended and runs once unsuspended', async () => {
    const a = await account();
    await call('POST', '/v1/contacts', a.key, { email: 'x@example.com' });
    const created = await call('POST', '/v1/contact-exports', a.key, {});
    await suspendAccount(sql(), a.id);
    expect(await runNextExport(sql(), bed.store, exportToken, 7)).toBeUndefined();
    const [queued] = await sql()`select status, attempts from contact_exports where id = ${created.body.id}`;
    expect(queued).toEqual({ status: 'queued', attempts: 0 });

    await unsuspend(a.id);
    expect(await runNextExport(sql(), bed.store, exportToken, 7)).toBe('success');
  });

  test('a running export stops, is queued again with no attempt spent, and runs once unsuspended', async () => {
    const a = await account();
    await call('POST', '/v1/contacts', a.key, { email: 'y@example.com' });
    const created = await call('POST', '/v1/contact-exports', a.key, {});
    // A store that takes its time before it reads the file: the run is still going at its first
    // lease renewal, where it looks at the account.
    class SlowStore extends LocalStore {
      override async receive(...args: Parameters<LocalStore['receive']>) {
        await suspendAccount(sql(), a.id);
        await Bun.sleep(5_000);
        return super.receive(...args);
      }
    }
    const slow = new SlowStore(bed.store.dir, 'http://api.test', bed.store.tokens);
    expect(await runNextExport(sql(), slow, exportToken, 7)).toBe('suspended');
    const [row] = await sql()`
      select status, attempts, object_key, lease_token from contact_exports where id = ${created.body.id}`;
    expect(row).toEqual({ status: 'queued', attempts: 0, object_key: null, lease_token: null });

    await unsuspend(a.id);
    expect(await runNextExport(sql(), bed.store, exportToken, 7)).toBe('success');
  }, 20_000);
});

describe('webhook deliveries', () => {
  let receiver: Server<undefined>;
  const received: string[] = [];
  beforeAll(() => {
    receiver = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      async fetch(req) {
        const batch = (await req.json()) as { data: { data: { email: string } }[] };
        received.push(...batch.data.map((e) => e.data.email));
        return new Response(null, { status: 204 });
      },
    });
  });
  afterAll(() => receiver.stop(true));

  test("a suspended account's endpoints wait, dropping nothing; unsuspended, every event goes out", async () => {
    const a = await account();
    // Made as the API makes it, its cursor after the account's head (the API refuses loopback URLs here).
    const url = `http://127.0.0.1:${receiver.port}/`;
    const secret = `whsec_${btoa('0123456789abcdef0123456789abcdef')}`;
    const [endpoint] = await sql()<{ id: string }[]>`
      insert into webhook_endpoints (account_id, url, secret, delivered_position)
      values (${a.id}, ${url}, ${secret}, 1)
      returning id`;
    const emails = ['w1@example.com', 'w2@example.com', 'w3@example.com'];
    await suspendAccount(sql(), a.id);
    // Events of writes made before the suspension, placed after it.
    await sql()`
      insert into contacts (account_id, email_md5, email, brand_ids, first_source)
      select ${a.id}, md5(lower(e))::uuid, e, array[${a.brand}::uuid], 'api' from unnest(${emails}::text[]) e`;
    await sql()`
      insert into brand_subscribe_events (account_id, brand_id, email_md5s, emails, source)
      select ${a.id}, ${a.brand}, array_agg(md5(lower(e))::uuid order by md5(lower(e))),
        array_agg(e order by md5(lower(e))), 'api'
      from unnest(${emails}::text[]) e`;
    await sequenceEvents(sql());

    const relay = startRelay(sql(), { allowPrivate: true, checkUrl: checkWebhookUrl, pollMs: 20 });
    const sequencer = runLoop('test sequencer', 20, () => sequenceEvents(sql()));
    try {
      await Bun.sleep(1_000);
      expect(received).toEqual([]);
      const [waiting] = await sql()`
        select attempts, batch_id, last_failure_at from webhook_endpoints where id = ${endpoint!.id}`;
      expect(waiting).toEqual({ attempts: 0, batch_id: null, last_failure_at: null });

      await unsuspend(a.id);
      relay.poke();
      const deadline = Date.now() + 10_000;
      while (received.length < emails.length && Date.now() < deadline) await Bun.sleep(20);
      expect([...received].sort()).toEqual(emails);
    } finally {
      await relay.stop();
      await sequencer.stop();
    }
  });
});

describe('the events feed and rejected-rows reports', () => {
  test('403 while suspended, 401 with a revoked key; both serve again once unsuspended', async () => {
    const a = await account();
    const id = await stageImport(sql(), bed.store, a.id, 'Email\nok@example.com\nnot-an-email\n', {
      columns: ['Email'],
    });
    expect(await runImport(importDeps(), a.id, id)).toBe('ended');
    const report = `/v1/contact-imports/${id}/rejected-rows`;
    expect((await call('GET', report, a.key)).status).toBe(200);
    expect((await call('GET', '/v1/events', a.key)).status).toBe(200);

    await suspendAccount(sql(), a.id);
    expectProblem(await call('GET', report, a.key), 403, 'permission_error');
    expectProblem(await call('GET', '/v1/events', a.key), 403, 'permission_error');

    await unsuspend(a.id);
    const again = await call('GET', report, a.key);
    expect(again.status).toBe(200);
    expect(again.body).toContain('not-an-email');
    expect((await call('GET', '/v1/events', a.key)).status).toBe(200);

    // The report is fetched with a key, never by a link of its own: a revoked key gets nothing.
    await revokeKey(sql(), a.key);
    expectProblem(await call('GET', report, a.key), 401, 'authentication_error');
  });
});

// GET /v1/contacts/{emailMd5} and POST /v1/contacts/{emailMd5}/disable.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { expectProblem } from '../helpers/app';
import { createAttribute, createBrand, createKey } from '../helpers/fixtures';
import {
  CONTACT_PATHS,
  type ContactTestApp,
  contactTestApp,
  create,
  eventsOf,
  expectContactPath,
  hash,
  md5,
  rowOf,
} from './contacts-support';

let t: ContactTestApp;
let brand: string;
let n = 0;

const fresh = () => `g.${++n}@example.com`;

for (const path of CONTACT_PATHS) {
  describe(`${path} path`, () => {
    beforeAll(async () => {
      t = await contactTestApp(path);
      await createAttribute(t.db.sql, t.accountId, 'zeta', 'string');
      await createAttribute(t.db.sql, t.accountId, 'home', 'email');
      await createAttribute(t.db.sql, t.accountId, 'alpha', 'number');
      await createAttribute(t.db.sql, t.accountId, 'opt', 'boolean');
      brand = await createBrand(t.db.sql, t.accountId, 'Brand');
    });
    afterAll(() => t.close());

    describe('GET /v1/contacts/{emailMd5}', () => {
      test('returns the Contact; attributes in schema order, derived keys after their email attribute', async () => {
        const email = fresh();
        const created = await create(t, {
          email,
          attributes: { alpha: 3, zeta: 'z', home: 'Me@Home.Example', opt: false },
          brandIds: [brand],
        });
        const res = await t.call('GET', `/v1/contacts/${md5(email)}`);
        expect(res.status).toBe(200);
        expect(res.body).toEqual(created);
        const lower = 'me@home.example';
        expect(Object.entries(res.body.attributes)).toEqual([
          ['zeta', 'z'],
          ['home', 'Me@Home.Example'],
          ['home:md5', hash('md5', lower)],
          ['home:sha256', hash('sha256', lower)],
          ['home:sha512', hash('sha512', lower)],
          ['home:domain', 'home.example'],
          ['alpha', 3],
          ['opt', false],
        ]);
      });

      test('uppercase hex is accepted; emailMd5 comes back lowercase', async () => {
        const email = fresh();
        await create(t, { email });
        const res = await t.call('GET', `/v1/contacts/${md5(email).toUpperCase()}`);
        expect(res.status).toBe(200);
        expect(res.body.emailMd5).toBe(md5(email));
      });

      test('a malformed emailMd5 is 400 with the parameter named', async () => {
        for (const bad of [
          '123',
          'z'.repeat(32),
          `${'a'.repeat(32)}0`,
          `${md5('x@y.z').slice(0, 8)}-${md5('x@y.z').slice(8)}`,
        ]) {
          const p = expectProblem(await t.call('GET', `/v1/contacts/${bad}`), 400, 'invalid_request_error');
          expect(p.errors?.[0]?.parameter).toBe('emailMd5');
        }
      });

      test('404 when no such contact; another account’s contact is 404 too', async () => {
        expectProblem(await t.call('GET', `/v1/contacts/${md5('nobody@example.com')}`), 404, 'not_found_error');
        const email = fresh();
        await create(t, { email });
        const [other] = await t.db.sql<{ id: string }[]>`insert into accounts (name) values ('B') returning id`;
        expectProblem(
          await t.call('GET', `/v1/contacts/${md5(email)}`, { key: await createKey(t.db.sql, other!.id) }),
          404,
          'not_found_error',
        );
      });

      test('brandIds include deleted brands', async () => {
        const email = fresh();
        const gone = await createBrand(t.db.sql, t.accountId, `Gone ${n}`);
        await create(t, { email, brandIds: [gone] });
        await t.db.sql`update brands set deleted_at = now() where id = ${gone}`;
        expect((await t.call('GET', `/v1/contacts/${md5(email)}`)).body.brandIds).toEqual([gone]);
      });

      test('401 without a key; 403 without contacts:read', async () => {
        expectProblem(
          await t.call('GET', `/v1/contacts/${md5('a@b.example')}`, { key: null }),
          401,
          'authentication_error',
        );
        const key = await createKey(t.db.sql, t.accountId, ['brands:read']);
        expectProblem(await t.call('GET', `/v1/contacts/${md5('a@b.example')}`, { key }), 403, 'permission_error');
      });
    });

    describe('POST /v1/contacts/{emailMd5}/disable', () => {
      const disable = (email: string, opts: { body?: unknown; raw?: string; headers?: Record<string, string> } = {}) =>
        t.call('POST', `/v1/contacts/${md5(email)}/disable`, opts);

      test('disables and returns the Contact with enabled false; GET shows it disabled', async () => {
        const email = fresh();
        const created = await create(t, { email, attributes: { zeta: 'z' }, brandIds: [brand] });
        const res = await disable(email);
        expect(res.status).toBe(200);
        expect(res.body).toEqual({ ...created, enabled: false });
        expect((await t.call('GET', `/v1/contacts/${md5(email)}`)).body.enabled).toBe(false);
      });

      test('is idempotent', async () => {
        const email = fresh();
        await create(t, { email });
        await disable(email);
        const before = await rowOf(t, email);
        const again = await disable(email);
        expect(again.status).toBe(200);
        expect(again.body.enabled).toBe(false);
        expect(await rowOf(t, email)).toEqual(before);
      });

      test('accepts an empty JSON object; refuses any field', async () => {
        const email = fresh();
        await create(t, { email });
        expect((await disable(email, { body: {} })).status).toBe(200);
        const p = expectProblem(await disable(email, { body: { enabled: false } }), 400, 'invalid_request_error');
        expect(p.errors?.[0]?.pointer).toBe('/enabled');
        expectProblem(await disable(email, { body: [] }), 400, 'invalid_request_error');
      });

      test('keeps attributes, brands and hidden fields; records no event', async () => {
        const email = fresh();
        await create(t, { email, brandIds: [brand] });
        const before = await rowOf(t, email);
        await disable(email);
        expect(await rowOf(t, email)).toMatchObject({ ...before, enabled: false, updated_at: expect.any(Date) });
        expect(await eventsOf(t, email)).toEqual([brand]);
      });

      test('404 for an unknown contact; 400 for a malformed emailMd5', async () => {
        expectProblem(
          await t.call('POST', `/v1/contacts/${md5('nobody@example.com')}/disable`),
          404,
          'not_found_error',
        );
        expectProblem(await t.call('POST', '/v1/contacts/nothex/disable'), 400, 'invalid_request_error');
      });

      test('403 with a read-only key', async () => {
        const email = fresh();
        await create(t, { email });
        const key = await createKey(t.db.sql, t.accountId, ['contacts:read']);
        expectProblem(await t.call('POST', `/v1/contacts/${md5(email)}/disable`, { key }), 403, 'permission_error');
        expect((await rowOf(t, email))!.enabled).toBe(true);
      });
    });

    test('the requests took the path', () => expectContactPath(t));
  });
}

// Brand assignment: GET/POST /v1/contacts/{emailMd5}/brands, DELETE …/brands/{brandId}, and the
// deprecated /subscriptions paths, which must behave identically (every test runs on both).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { expectProblem } from '../helpers/app';
import { createAccount, createBrand, createKey } from '../helpers/fixtures';
import {
  CONTACT_PATHS,
  type ContactTestApp,
  contactTestApp,
  create,
  eventsOf,
  expectContactPath,
  md5,
  rowOf,
} from './contacts-support';

let t: ContactTestApp;
let alpha: string;
let beta: string;
let gamma: string;
let otherAccountBrand: string;
let n = 0;

async function contact(brandIds: string[] = [alpha]) {
  const email = `b.${++n}@example.com`;
  await create(t, { email, brandIds });
  return email;
}

/** A brand deleted after the contact was assigned to it (brands.deleted_at). */
async function deletedBrandOn(email: string) {
  const id = await createBrand(t.db.sql, t.accountId, `Deleted ${++n}`);
  await t.call('POST', `/v1/contacts/${md5(email)}/brands`, { body: { brandIds: [id] } });
  await t.db.sql`update brands set deleted_at = now() where id = ${id}`;
  return id;
}

for (const path of CONTACT_PATHS) {
  describe(`${path} path`, () => {
    beforeAll(async () => {
      t = await contactTestApp(path);
      alpha = await createBrand(t.db.sql, t.accountId, 'Alpha');
      beta = await createBrand(t.db.sql, t.accountId, 'Beta', { enabled: false });
      gamma = await createBrand(t.db.sql, t.accountId, 'Gamma');
      otherAccountBrand = await createBrand(t.db.sql, await createAccount(t.db.sql, 'Other'), 'Elsewhere');
    });
    afterAll(() => t.close());

    for (const segment of ['brands', 'subscriptions']) {
      const path = (email: string) => `/v1/contacts/${md5(email)}/${segment}`;
      const list = (email: string) => t.call('GET', path(email));
      const add = (email: string, body: unknown, key?: string) => t.call('POST', path(email), { body, key });
      const remove = (email: string, brandId: string, key?: string) =>
        t.call('DELETE', `${path(email)}/${brandId}`, { key });

      describe(`GET /v1/contacts/{emailMd5}/${segment}`, () => {
        test('returns {brands: [{id, name}]} in assignment order', async () => {
          const email = await contact([gamma, alpha]);
          const res = await list(email);
          expect(res.status).toBe(200);
          expect(res.body).toEqual({
            brands: [
              { id: gamma, name: 'Gamma' },
              { id: alpha, name: 'Alpha' },
            ],
          });
        });

        test('an empty list for a contact without brands', async () => {
          expect((await list(await contact([]))).body).toEqual({ brands: [] });
        });

        test('deleted brands are listed with their name', async () => {
          const email = await contact();
          const gone = await deletedBrandOn(email);
          expect((await list(email)).body.brands).toEqual([
            { id: alpha, name: 'Alpha' },
            { id: gone, name: `Deleted ${n}` },
          ]);
        });

        test('uppercase emailMd5; 400 malformed; 404 unknown contact', async () => {
          const email = await contact();
          expect((await t.call('GET', `/v1/contacts/${md5(email).toUpperCase()}/${segment}`)).status).toBe(200);
          expectProblem(await t.call('GET', `/v1/contacts/nothex/${segment}`), 400, 'invalid_request_error');
          expectProblem(await list('nobody@example.com'), 404, 'not_found_error');
        });
      });

      describe(`POST /v1/contacts/{emailMd5}/${segment}`, () => {
        test('adds only new brands, returns the updated list, one event per newly added brand', async () => {
          const email = await contact([alpha]);
          const res = await add(email, { brandIds: [alpha, beta, gamma] });
          expect(res.status).toBe(200);
          expect(res.body).toEqual({
            brands: [
              { id: alpha, name: 'Alpha' },
              { id: beta, name: 'Beta' },
              { id: gamma, name: 'Gamma' },
            ],
          });
          expect((await rowOf(t, email))!.brand_ids).toEqual([alpha, beta, gamma]);
          expect(await eventsOf(t, email)).toEqual([alpha, beta, gamma]);
        });

        test('adding brands already assigned changes nothing and records no event', async () => {
          const email = await contact([alpha, gamma]);
          const before = await rowOf(t, email);
          const res = await add(email, { brandIds: [gamma] });
          expect(res.status).toBe(200);
          expect(res.body.brands.map((b: { id: string }) => b.id)).toEqual([alpha, gamma]);
          expect(await rowOf(t, email)).toEqual(before);
          expect(await eventsOf(t, email)).toEqual([alpha, gamma]);
        });

        test('publishBrandSubscribeEvents false: brands added, no events', async () => {
          const email = await contact([]);
          const res = await add(email, { brandIds: [beta], publishBrandSubscribeEvents: false });
          expect(res.body.brands).toEqual([{ id: beta, name: 'Beta' }]);
          expect(await eventsOf(t, email)).toEqual([]);
        });

        test('uppercase brand ids are the same brands', async () => {
          const email = await contact([alpha]);
          const res = await add(email, { brandIds: [alpha.toUpperCase(), gamma.toUpperCase()] });
          expect(res.body.brands.map((b: { id: string }) => b.id)).toEqual([alpha, gamma]);
          expect(await eventsOf(t, email)).toEqual([alpha, gamma]);
        });

        test('unknown, deleted and other accounts’ brand ids: 400 /brandIds, nothing added', async () => {
          const email = await contact([alpha]);
          const gone = await deletedBrandOn(email);
          for (const id of [crypto.randomUUID(), gone, otherAccountBrand]) {
            const p = expectProblem(await add(email, { brandIds: [gamma, id] }), 400, 'invalid_request_error');
            expect(p.errors[0].pointer).toBe('/brandIds');
            expect(p.detail).toContain(id);
          }
          expect((await rowOf(t, email))!.brand_ids).toEqual([alpha, gone]);
        });

        test('body validation: required, 1 to 100 items, unique, UUIDs, boolean flag, no other fields', async () => {
          const email = await contact();
          const ids = (k: number) => Array.from({ length: k }, () => crypto.randomUUID());
          const cases: Array<[unknown, string]> = [
            [{}, '/brandIds'],
            [{ brandIds: [] }, '/brandIds'],
            [{ brandIds: ids(101) }, '/brandIds'],
            [{ brandIds: [alpha, alpha] }, '/brandIds'],
            [{ brandIds: ['nope'] }, '/brandIds/0'],
            [{ brandIds: alpha }, '/brandIds'],
            [{ brandIds: [alpha], publishBrandSubscribeEvents: 'false' }, '/publishBrandSubscribeEvents'],
            [{ brandIds: [alpha], subscribe: true }, '/subscribe'],
          ];
          for (const [body, ptr] of cases) {
            const p = expectProblem(await add(email, body), 400, 'invalid_request_error');
            expect(p.errors?.[0]?.pointer).toBe(ptr);
          }
        });

        test('100 brand ids is the upper bound (then checked against the account)', async () => {
          const email = await contact();
          const p = expectProblem(
            await add(email, { brandIds: Array.from({ length: 100 }, () => crypto.randomUUID()) }),
            400,
            'invalid_request_error',
          );
          expect(p.errors[0].pointer).toBe('/brandIds');
        });

        test('404 for an unknown contact comes before the brand ids are checked', async () => {
          expectProblem(await add('nobody@example.com', { brandIds: [crypto.randomUUID()] }), 404, 'not_found_error');
        });

        test('403 with a read-only key', async () => {
          const email = await contact([]);
          const key = await createKey(t.db.sql, t.accountId, ['contacts:read', 'brands:read']);
          expectProblem(await add(email, { brandIds: [alpha] }, key), 403, 'permission_error');
          expect((await rowOf(t, email))!.brand_ids).toEqual([]);
        });
      });

      describe(`DELETE /v1/contacts/{emailMd5}/${segment}/{brandId}`, () => {
        test('204 with no body; the brand is removed, others keep their order', async () => {
          const email = await contact([alpha, beta, gamma]);
          const res = await remove(email, beta);
          expect(res.status).toBe(204);
          expect(res.body).toBeUndefined();
          expect((await list(email)).body.brands.map((b: { id: string }) => b.id)).toEqual([alpha, gamma]);
        });

        test('400 when the contact is not assigned to the brand', async () => {
          const email = await contact([alpha]);
          const p = expectProblem(await remove(email, gamma), 400, 'invalid_request_error');
          expect(p.errors[0].parameter).toBe('brandId');
          expect((await rowOf(t, email))!.brand_ids).toEqual([alpha]);
        });

        test('400 when the id is not a brand of the account (unknown, deleted, another account’s)', async () => {
          const email = await contact([alpha]);
          const gone = await deletedBrandOn(email);
          for (const id of [crypto.randomUUID(), gone, otherAccountBrand]) {
            const p = expectProblem(await remove(email, id), 400, 'invalid_request_error');
            expect(p.detail).toContain('Not a brand');
          }
          expect((await rowOf(t, email))!.brand_ids).toEqual([alpha, gone]);
        });

        test('removing twice: the second is 400 not assigned', async () => {
          const email = await contact([alpha]);
          expect((await remove(email, alpha)).status).toBe(204);
          const p = expectProblem(await remove(email, alpha), 400, 'invalid_request_error');
          expect(p.detail).toContain('not assigned');
        });

        test('404 when the contact does not exist, before the brand is checked', async () => {
          expectProblem(await remove('nobody@example.com', alpha), 404, 'not_found_error');
          expectProblem(await remove('nobody@example.com', crypto.randomUUID()), 404, 'not_found_error');
        });

        test('400 for a brand id that is not a UUID, or a malformed emailMd5', async () => {
          const email = await contact([alpha]);
          const p = expectProblem(await remove(email, 'not-a-uuid'), 400, 'invalid_request_error');
          expect(p.errors[0].parameter).toBe('brandId');
          expectProblem(await t.call('DELETE', `/v1/contacts/xyz/${segment}/${alpha}`), 400, 'invalid_request_error');
        });

        test('removing records no event; re-adding records a new one', async () => {
          const email = await contact([alpha]);
          await remove(email, alpha);
          expect(await eventsOf(t, email)).toEqual([alpha]);
          await add(email, { brandIds: [alpha] });
          expect(await eventsOf(t, email)).toEqual([alpha, alpha]);
        });
      });
    }

    describe('/brands and /subscriptions are one resource', () => {
      test('a brand added through one path is listed and removable through the other', async () => {
        const email = await contact([]);
        await t.call('POST', `/v1/contacts/${md5(email)}/subscriptions`, { body: { brandIds: [gamma] } });
        const viaBrands = await t.call('GET', `/v1/contacts/${md5(email)}/brands`);
        const viaSubscriptions = await t.call('GET', `/v1/contacts/${md5(email)}/subscriptions`);
        expect(viaBrands.body).toEqual({ brands: [{ id: gamma, name: 'Gamma' }] });
        expect(viaSubscriptions.body).toEqual(viaBrands.body);
        expect((await t.call('DELETE', `/v1/contacts/${md5(email)}/brands/${gamma}`)).status).toBe(204);
        expect((await t.call('GET', `/v1/contacts/${md5(email)}/subscriptions`)).body).toEqual({ brands: [] });
      });
    });

    test('the requests took the path', () => expectContactPath(t));
  });
}

// POST /v1/contacts for a new email: the Contact returned, typed attributes, brands and events,
// and every request rule that gives 400 or 409 before anything is written.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { addSeed } from '../../src/cli/admin/seeds';
import { expectProblem } from '../helpers/app';
import { createAccount, createAttribute, createBrand, createKey } from '../helpers/fixtures';
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
let brandA: string;
let brandB: string;
let deletedBrand: string;
let otherAccountBrand: string;
let n = 0;
/** A fresh address per test, so tests never depend on each other. */
const fresh = (tag = 'c') => `${tag}.${++n}@example.com`;

const post = (body: unknown, key?: string | null) => t.call('POST', '/v1/contacts', { body, key });

for (const path of CONTACT_PATHS) {
  describe(`${path} path`, () => {
    beforeAll(async () => {
      t = await contactTestApp(path);
      const sql = t.db.sql;
      await createAttribute(sql, t.accountId, 'city', 'string');
      await createAttribute(sql, t.accountId, 'age', 'number');
      await createAttribute(sql, t.accountId, 'vip', 'boolean');
      await createAttribute(sql, t.accountId, 'tags', 'array');
      await createAttribute(sql, t.accountId, 'workEmail', 'email');
      brandA = await createBrand(sql, t.accountId, 'Alpha');
      brandB = await createBrand(sql, t.accountId, 'Beta', { enabled: false });
      deletedBrand = await createBrand(sql, t.accountId, 'Gone');
      await sql`update brands set deleted_at = now() where id = ${deletedBrand}`;
      const other = await createAccount(sql, 'Other');
      otherAccountBrand = await createBrand(sql, other, 'Elsewhere');
    });
    afterAll(() => t.close());

    describe('POST /v1/contacts: a new email is created', () => {
      test('201 with exactly the Contact fields', async () => {
        const res = await post({ email: '  Ann.Lee@Example.COM ', attributes: { city: 'Oslo' }, brandIds: [brandA] });
        expect(res.status).toBe(201);
        expect(Object.keys(res.body).sort()).toEqual([
          'attributes',
          'brandIds',
          'createdAt',
          'email',
          'emailMd5',
          'enabled',
        ]);
        expect(res.body).toMatchObject({
          email: 'Ann.Lee@Example.COM',
          emailMd5: hash('md5', 'ann.lee@example.com'),
          attributes: { city: 'Oslo' },
          brandIds: [brandA],
          enabled: true,
        });
        expect(new Date(res.body.createdAt).toISOString()).toBe(res.body.createdAt);
        const get = await t.call('GET', `/v1/contacts/${res.body.emailMd5}`);
        expect(get.body).toEqual(res.body);
      });

      test('hidden fields: first source api, not hard bounced', async () => {
        const email = fresh();
        await create(t, { email });
        const row = await rowOf(t, email);
        expect(row).toMatchObject({
          first_source: 'api',
          first_import_id: null,
          first_import_method: null,
          hard_bounced: false,
          hard_bounced_at: null,
        });
      });

      test('attributes are stored typed from native values and from canonical text', async () => {
        const email = fresh();
        const res = await post({
          email,
          attributes: { city: 'Bergen', age: '42', vip: 'true', tags: 'a;b\\;c', workEmail: ' Work@Corp.example ' },
        });
        expect(res.status).toBe(201);
        expect((await rowOf(t, email))!.attributes).toEqual({
          city: 'Bergen',
          age: 42,
          vip: true,
          tags: ['a', 'b;c'],
          workEmail: 'Work@Corp.example',
        });
        const native = fresh();
        await create(t, { email: native, attributes: { age: -1.5, vip: false, tags: ['x', 'y'], city: 7 } });
        expect((await rowOf(t, native))!.attributes).toEqual({ age: -1.5, vip: false, tags: ['x', 'y'], city: '7' });
      });

      test('boolean text accepts yes/no/1/0 in any case; false is kept, not dropped', async () => {
        for (const [text, value] of [
          ['YES', true],
          ['no', false],
          ['1', true],
          ['0', false],
          ['False', false],
        ] as const) {
          const email = fresh();
          await create(t, { email, attributes: { vip: text } });
          expect((await rowOf(t, email))!.attributes).toEqual({ vip: value });
        }
      });

      test('attribute keys match the schema case-insensitively and are stored under the schema name', async () => {
        const res = await post({ email: fresh(), attributes: { CITY: 'Rome', WorkEMAIL: 'x@y.example' } });
        expect(res.status).toBe(201);
        expect(res.body.attributes.city).toBe('Rome');
        expect(res.body.attributes.workEmail).toBe('x@y.example');
        expect(res.body.attributes.CITY).toBeUndefined();
      });

      test('email-type attributes expand into read-only md5, sha256, sha512 and domain of the address', async () => {
        const res = await post({ email: fresh(), attributes: { workEmail: 'Bob@Corp.Example' } });
        const lower = 'bob@corp.example';
        expect(res.body.attributes).toEqual({
          workEmail: 'Bob@Corp.Example',
          'workEmail:md5': hash('md5', lower),
          'workEmail:sha256': hash('sha256', lower),
          'workEmail:sha512': hash('sha512', lower),
          'workEmail:domain': 'corp.example',
        });
      });

      test('the identity email is not in attributes', async () => {
        const res = await post({ email: fresh() });
        expect(res.body.attributes).toEqual({});
      });

      test('empty strings, null and empty lists count as not sent; a missing boolean stays absent', async () => {
        const email = fresh();
        const res = await post({ email, attributes: { city: '', age: null, tags: [], vip: '' } });
        expect(res.status).toBe(201);
        expect(res.body.attributes).toEqual({});
        expect((await rowOf(t, email))!.attributes).toEqual({});
      });

      test('a text value of 255 characters is accepted; list entries of 255 too', async () => {
        const res = await post({ email: fresh(), attributes: { city: 'x'.repeat(255), tags: ['y'.repeat(255)] } });
        expect(res.status).toBe(201);
        expect(res.body.attributes.city).toHaveLength(255);
      });

      test('brandIds: disabled brands are brands; repeats count once; one event per brand', async () => {
        const email = fresh();
        const res = await post({ email, brandIds: [brandA, brandB, brandA.toUpperCase()] });
        expect(res.status).toBe(201);
        expect(res.body.brandIds).toEqual([brandA, brandB]);
        expect(await eventsOf(t, email)).toEqual([brandA, brandB]);
      });

      test('publishBrandSubscribeEvents false assigns the brands without events', async () => {
        const email = fresh();
        const res = await post({ email, brandIds: [brandA], publishBrandSubscribeEvents: false });
        expect(res.body.brandIds).toEqual([brandA]);
        expect(await eventsOf(t, email)).toEqual([]);
      });

      test('no brandIds, no events', async () => {
        const email = fresh();
        await create(t, { email, attributes: { city: 'Oslo' } });
        expect(await eventsOf(t, email)).toEqual([]);
      });
    });

    describe('POST /v1/contacts: requests rejected with 400 change nothing', () => {
      async function rejected(body: Record<string, unknown>, ptr: string) {
        const res = await post(body);
        const problem = expectProblem(res, 400, 'invalid_request_error');
        expect(problem.errors?.[0]?.pointer).toBe(ptr);
        if (typeof body.email === 'string' && body.email.includes('@')) {
          expectProblem(await t.call('GET', `/v1/contacts/${md5(body.email)}`), 404, 'not_found_error');
          expect(await eventsOf(t, body.email)).toEqual([]);
        }
        return problem;
      }

      test('missing or invalid email points at /email', async () => {
        await rejected({ attributes: { city: 'x' } }, '/email');
        for (const email of ['nope', 'a@b', 'a b@example.com', 'a@@example.com', `${'x'.repeat(250)}@example.com`])
          await rejected({ email }, '/email');
      });

      test('unknown attribute: /attributes/<name>', async () => {
        const p = await rejected({ email: fresh(), attributes: { city: 'x', shoeSize: 42 } }, '/attributes/shoeSize');
        expect(p.detail).toContain('shoeSize');
      });

      test('names with / and ~ are escaped in the pointer as RFC 6901 says', async () => {
        await rejected({ email: fresh(), attributes: { 'a/b~c': 1 } }, '/attributes/a~1b~0c');
      });

      test('Email and Brand are rejected case-insensitively', async () => {
        for (const key of ['Email', 'email', 'EMAIL', 'Brand', 'brand', 'BRAND'])
          await rejected({ email: fresh(), attributes: { [key]: 'x' } }, `/attributes/${key}`);
      });

      test('derived name:subKey keys are rejected, of custom and predefined email attributes', async () => {
        for (const key of [
          'workEmail:md5',
          'workemail:SHA256',
          'workEmail:sha512',
          'workEmail:domain',
          'email:md5',
          'Email:domain',
        ]) {
          const p = await rejected({ email: fresh(), attributes: { [key]: 'x' } }, `/attributes/${key}`);
          expect(p.detail).toContain('read-only');
        }
      });

      test('the same attribute twice (differing in case) is rejected', async () => {
        await rejected({ email: fresh(), attributes: { city: 'a', City: 'b' } }, '/attributes/City');
      });

      test('values over 255 characters, in text and in list entries', async () => {
        await rejected({ email: fresh(), attributes: { city: 'x'.repeat(256) } }, '/attributes/city');
        await rejected({ email: fresh(), attributes: { tags: ['ok', 'y'.repeat(256)] } }, '/attributes/tags');
        await rejected({ email: fresh(), attributes: { tags: `ok;${'y'.repeat(256)}` } }, '/attributes/tags');
      });

      test('characters are counted, not bytes or UTF-16 units', async () => {
        const res = await post({ email: fresh(), attributes: { city: '😀'.repeat(255) } });
        expect(res.status).toBe(201);
      });

      test('values not readable as their type', async () => {
        const cases: Array<[string, unknown]> = [
          ['age', 'forty'],
          ['age', '0x10'],
          ['age', true],
          ['vip', 'maybe'],
          ['vip', 1],
          ['tags', { a: 1 }],
          ['tags', [['nested']]],
          ['city', { a: 1 }],
          ['city', ['x']],
          ['workEmail', 'not-an-email'],
          ['workEmail', 5],
          // PostgreSQL cannot store these; they must be a 400, never a 500.
          ['city', 'a\u0000b'],
          ['city', 'a\ud800b'],
          ['tags', ['ok', 'x\u0000']],
        ];
        for (const [name, value] of cases)
          await rejected({ email: fresh(), attributes: { [name]: value } }, `/attributes/${name}`);
      });

      test('every attribute problem is listed', async () => {
        const p = await rejected({ email: fresh(), attributes: { nope: 1, age: 'x', brand: 'y' } }, '/attributes/nope');
        expect(p.errors.map((e: { pointer: string }) => e.pointer)).toEqual([
          '/attributes/nope',
          '/attributes/age',
          '/attributes/brand',
        ]);
      });

      test('attributes must be an object', async () => {
        await rejected({ email: fresh(), attributes: [] }, '/attributes');
        await rejected({ email: fresh(), attributes: 'city=x' }, '/attributes');
      });

      test('unknown, deleted and other accounts’ brand ids point at /brandIds', async () => {
        for (const id of [crypto.randomUUID(), deletedBrand, otherAccountBrand]) {
          const p = await rejected({ email: fresh(), brandIds: [brandA, id] }, '/brandIds');
          expect(p.detail).toContain(id);
        }
      });

      test('a brand id that is not a UUID', async () => {
        await rejected({ email: fresh(), brandIds: ['not-a-uuid'] }, '/brandIds/0');
      });

      test('restoreDisabled without duplicateContactStrategy points at /restoreDisabled', async () => {
        await rejected({ email: fresh(), restoreDisabled: true }, '/restoreDisabled');
      });

      test('an unknown strategy, a wrongly typed flag, an unknown field', async () => {
        await rejected({ email: fresh(), duplicateContactStrategy: 'merge' }, '/duplicateContactStrategy');
        await rejected({ email: fresh(), overwriteBrands: 'yes' }, '/overwriteBrands');
        await rejected({ email: fresh(), publishBrandSubscribeEvents: 'no' }, '/publishBrandSubscribeEvents');
        await rejected({ email: fresh(), duplicateStrategy: 'overwrite' }, '/duplicateStrategy');
      });

      test('a body that is not a JSON object, or not JSON', async () => {
        expectProblem(await post([1]), 400, 'invalid_request_error');
        expectProblem(await t.call('POST', '/v1/contacts'), 400, 'invalid_request_error');
        expectProblem(
          await t.call('POST', '/v1/contacts', { raw: '{"email":', headers: { 'content-type': 'application/json' } }),
          400,
          'invalid_request_error',
        );
      });
    });

    describe('POST /v1/contacts: seeds, keys and scopes', () => {
      test('an email of a seed address is 409 contact_exists, with or without a strategy', async () => {
        const email = 'Seed@Example.com';
        // As the admin CLI's `seed add` does (with the account's seeds counter, which the fast path reads).
        await addSeed(t.db.sql, t.accountId, email);
        for (const extra of [
          {},
          { duplicateContactStrategy: 'overwrite' },
          { duplicateContactStrategy: 'skip', restoreDisabled: true },
        ]) {
          expectProblem(await post({ email: 'seed@example.com', ...extra }), 409, 'contact_exists');
        }
        expect(await rowOf(t, email)).toBeUndefined();
      });

      test('401 without a key, 403 with a read-only key, before the body is looked at', async () => {
        expectProblem(await post({ email: 'x' }, null), 401, 'authentication_error');
        const readOnly = await createKey(t.db.sql, t.accountId, ['contacts:read']);
        expectProblem(await post({ email: 'x' }, readOnly), 403, 'permission_error');
        expectProblem(await post({ email: fresh() }, readOnly), 403, 'permission_error');
      });
    });

    test('the requests took the path', () => expectContactPath(t));
  });
}

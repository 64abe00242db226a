// PATCH /v1/contacts/{emailMd5}: RFC 7386 merge patch of the attributes.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { expectProblem } from '../helpers/app';
import { createAttribute, createBrand, createKey } from '../helpers/fixtures';
import {
  CONTACT_PATHS,
  type ContactTestApp,
  contactTestApp,
  create,
  disable,
  eventsOf,
  expectContactPath,
  hash,
  md5,
  md5ToUuid,
  rowOf,
} from './contacts-support';

let t: ContactTestApp;
let brand: string;
let n = 0;

async function contact() {
  const email = `p.${++n}@example.com`;
  await create(t, { email, attributes: { city: 'Oslo', age: 30, tags: ['a'] }, brandIds: [brand] });
  return email;
}
const patch = (email: string, body: unknown, key?: string | null) =>
  t.call('PATCH', `/v1/contacts/${md5(email)}`, { body, key });

for (const path of CONTACT_PATHS) {
  describe(`${path} path`, () => {
    beforeAll(async () => {
      t = await contactTestApp(path);
      for (const [name, type] of [
        ['city', 'string'],
        ['age', 'number'],
        ['vip', 'boolean'],
        ['tags', 'array'],
        ['alt', 'email'],
      ] as const) {
        await createAttribute(t.db.sql, t.accountId, name, type);
      }
      brand = await createBrand(t.db.sql, t.accountId, 'Brand');
    });
    afterAll(() => t.close());

    describe('PATCH /v1/contacts/{emailMd5}: merge patch', () => {
      test('a value sets, null removes, absent attributes are untouched; the updated Contact is returned', async () => {
        const email = await contact();
        const res = await patch(email, { attributes: { city: 'Rome', age: null, vip: 'false', tags: ['x', 'y'] } });
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({
          email,
          emailMd5: md5(email),
          enabled: true,
          brandIds: [brand],
          attributes: { city: 'Rome', vip: false, tags: ['x', 'y'] },
        });
        expect(res.body.attributes).not.toHaveProperty('age');
        expect((await rowOf(t, email))!.attributes).toEqual({ city: 'Rome', vip: false, tags: ['x', 'y'] });
        expect((await t.call('GET', `/v1/contacts/${md5(email)}`)).body).toEqual(res.body);
      });

      test('values are typed like on create; keys match case-insensitively', async () => {
        const email = await contact();
        const res = await patch(email, { attributes: { AGE: '41.5', Tags: 'p;q', alt: 'Me@Alt.Example' } });
        expect(res.status).toBe(200);
        expect((await rowOf(t, email))!.attributes).toEqual({
          city: 'Oslo',
          age: 41.5,
          tags: ['p', 'q'],
          alt: 'Me@Alt.Example',
        });
        expect(res.body.attributes['alt:domain']).toBe('alt.example');
        expect(res.body.attributes['alt:sha256']).toBe(hash('sha256', 'me@alt.example'));
      });

      test('null for an attribute the contact has no value for is a no-op', async () => {
        const email = await contact();
        const res = await patch(email, { attributes: { vip: null } });
        expect(res.status).toBe(200);
        expect(res.body.attributes).toEqual({ city: 'Oslo', age: 30, tags: ['a'] });
      });

      test('an empty attributes object changes nothing and returns the contact', async () => {
        const email = await contact();
        const res = await patch(email, { attributes: {} });
        expect(res.status).toBe(200);
        expect(res.body.attributes).toEqual({ city: 'Oslo', age: 30, tags: ['a'] });
      });

      test('uppercase emailMd5 addresses the same contact', async () => {
        const email = await contact();
        const res = await t.call('PATCH', `/v1/contacts/${md5(email).toUpperCase()}`, {
          body: { attributes: { city: 'Lima' } },
        });
        expect(res.status).toBe(200);
        expect(res.body.emailMd5).toBe(md5(email));
      });

      test('a disabled contact can be patched and stays disabled', async () => {
        const email = await contact();
        await disable(t, email);
        const res = await patch(email, { attributes: { city: 'Lima' } });
        expect(res.body).toMatchObject({ enabled: false, attributes: { city: 'Lima' } });
      });

      test('brands, events and hidden fields are not touched', async () => {
        const email = await contact();
        const before = await rowOf(t, email);
        await patch(email, { attributes: { city: 'Lima' } });
        const after = await rowOf(t, email);
        expect({ ...after, attributes: null, updated_at: null }).toEqual({
          ...before,
          attributes: null,
          updated_at: null,
        } as never);
        expect(await eventsOf(t, email)).toEqual([brand]);
      });

      test('a stored value that is not an object (written by other hands) counts as {}', async () => {
        for (const stored of ['null', '["a", 1]', '"text"', '5']) {
          const email = await contact();
          await t.db.sql`update contacts set attributes = ${stored}::jsonb
                         where account_id = ${t.accountId} and email_md5 = ${md5ToUuid(md5(email))}`;
          const res = await patch(email, { attributes: { city: 'Rome', age: null } });
          expect(res.status).toBe(200);
          expect(res.body.attributes).toEqual({ city: 'Rome' });
          expect((await rowOf(t, email))!.attributes).toEqual({ city: 'Rome' });
          expect((await patch(email, { attributes: { city: null } })).body.attributes).toEqual({});
          expect((await rowOf(t, email))!.attributes).toEqual({});
        }
      });
    });

    describe('PATCH /v1/contacts/{emailMd5}: rejected requests change nothing', () => {
      async function rejected(body: unknown, ptr: string | undefined) {
        const email = await contact();
        const before = await rowOf(t, email);
        const problem = expectProblem(await patch(email, body), 400, 'invalid_request_error');
        if (ptr !== undefined) expect(problem.errors?.[0]?.pointer).toBe(ptr);
        expect(await rowOf(t, email)).toEqual(before);
        return problem;
      }

      test('empty-string values', async () => {
        await rejected({ attributes: { city: '' } }, '/attributes/city');
        await rejected({ attributes: { age: '', city: 'Rome' } }, '/attributes/age');
      });

      test('an empty list is an empty value too (null removes)', async () => {
        await rejected({ attributes: { tags: [] } }, '/attributes/tags');
      });

      test('the identity email and the brand attribute, in any case', async () => {
        for (const key of ['Email', 'email', 'Brand', 'BRAND'])
          await rejected({ attributes: { [key]: 'x' } }, `/attributes/${key}`);
        await rejected({ attributes: { Email: null } }, '/attributes/Email');
      });

      test('derived sub-attributes', async () => {
        await rejected({ attributes: { 'alt:md5': 'x' } }, '/attributes/alt:md5');
        await rejected({ attributes: { 'alt:domain': null } }, '/attributes/alt:domain');
        await rejected({ attributes: { 'Email:sha512': 'x' } }, '/attributes/Email:sha512');
      });

      test('unknown attributes', async () => {
        await rejected({ attributes: { city: 'Rome', nope: 'x' } }, '/attributes/nope');
        await rejected({ attributes: { nope: null } }, '/attributes/nope');
      });

      test('over-long text and list entries', async () => {
        await rejected({ attributes: { city: 'x'.repeat(256) } }, '/attributes/city');
        await rejected({ attributes: { tags: ['ok', 'x'.repeat(256)] } }, '/attributes/tags');
      });

      test('values not readable as their type', async () => {
        await rejected({ attributes: { age: 'many' } }, '/attributes/age');
        await rejected({ attributes: { vip: 'perhaps' } }, '/attributes/vip');
        await rejected({ attributes: { alt: 'not an email' } }, '/attributes/alt');
        await rejected({ attributes: { city: { nested: true } } }, '/attributes/city');
        await rejected({ attributes: { city: 'nul\u0000' } }, '/attributes/city');
        await rejected({ attributes: { tags: ['\udc00'] } }, '/attributes/tags');
      });

      test('attributes is required and must be an object; no other fields', async () => {
        await rejected({}, '/attributes');
        await rejected({ attributes: null }, '/attributes');
        await rejected({ attributes: ['city'] }, '/attributes');
        await rejected({ attributes: {}, email: 'new@example.com' }, '/email');
        await rejected(undefined, '');
      });

      test('a malformed emailMd5 is 400 naming the path parameter', async () => {
        for (const bad of ['xyz', 'g'.repeat(32), 'a'.repeat(31), 'a'.repeat(33)]) {
          const p = expectProblem(
            await t.call('PATCH', `/v1/contacts/${bad}`, { body: { attributes: {} } }),
            400,
            'invalid_request_error',
          );
          expect(p.errors?.[0]?.parameter).toBe('emailMd5');
        }
      });
    });

    describe('PATCH /v1/contacts/{emailMd5}: order of checks', () => {
      test('404 for a contact that does not exist, before the attributes are checked against the schema', async () => {
        expectProblem(await patch('nobody@example.com', { attributes: { city: 'x' } }), 404, 'not_found_error');
        expectProblem(await patch('nobody@example.com', { attributes: { nope: 'x' } }), 404, 'not_found_error');
      });

      test('the request shape is checked before existence', async () => {
        expectProblem(await patch('nobody@example.com', { attributes: 'x' }), 400, 'invalid_request_error');
      });

      test('401 and 403 come first', async () => {
        expectProblem(await patch('nobody@example.com', { attributes: 'x' }, null), 401, 'authentication_error');
        const readOnly = await createKey(t.db.sql, t.accountId, ['contacts:read']);
        expectProblem(await patch('nobody@example.com', { attributes: 'x' }, readOnly), 403, 'permission_error');
      });

      test('another account’s contact is 404', async () => {
        const email = await contact();
        const other = await t.db.sql<{ id: string }[]>`insert into accounts (name) values ('B') returning id`;
        const otherKey = await createKey(t.db.sql, other[0]!.id);
        expectProblem(await patch(email, { attributes: {} }, otherKey), 404, 'not_found_error');
      });
    });

    test('the requests took the path', () => expectContactPath(t));
  });
}

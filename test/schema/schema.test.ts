// GET /v1/contact-schema (spec: Contact schema attribute, GET /v1/contact-schema; DESIGN: schema order).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { expectProblem, testApp, type TestApp } from '../helpers/app';
import { createAccount, createAttribute, createKey } from '../helpers/fixtures';

let t: TestApp;

beforeAll(async () => {
  t = await testApp();
});
afterAll(() => t.close());

async function account() {
  const id = await createAccount(t.db.sql);
  const key = await createKey(t.db.sql, id);
  return { id, key, schema: () => t.call('GET', '/v1/contact-schema', { key }) };
}

describe('GET /v1/contact-schema', () => {
  test('a new account has exactly the predefined Email (email) and Brand (array)', async () => {
    const a = await account();
    const res = await a.schema();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toStartWith('application/json');
    expect(res.body).toEqual({
      attributes: [
        { name: 'Email', type: 'email' },
        { name: 'Brand', type: 'array' },
      ],
    });
  });

  test('custom attributes follow Email and Brand in creation order, not by name', async () => {
    const a = await account();
    await createAttribute(t.db.sql, a.id, 'zeta', 'string', 'Last letter');
    await createAttribute(t.db.sql, a.id, 'Age', 'number');
    await createAttribute(t.db.sql, a.id, 'work_email', 'email', 'Office address');
    await createAttribute(t.db.sql, a.id, 'opt_in', 'boolean');
    await createAttribute(t.db.sql, a.id, 'Interests', 'array', 'Topics');
    await createAttribute(t.db.sql, a.id, 'alpha', 'string');
    const res = await a.schema();
    expect(res.body.attributes).toEqual([
      { name: 'Email', type: 'email' },
      { name: 'Brand', type: 'array' },
      { name: 'zeta', type: 'string', description: 'Last letter' },
      { name: 'Age', type: 'number' },
      { name: 'work_email', type: 'email', description: 'Office address' },
      { name: 'opt_in', type: 'boolean' },
      { name: 'Interests', type: 'array', description: 'Topics' },
      { name: 'alpha', type: 'string' },
    ]);
  });

  test('description is omitted when null, not sent as null', async () => {
    const a = await account();
    await createAttribute(t.db.sql, a.id, 'nickname', 'string');
    const attr = (await a.schema()).body.attributes[2];
    expect(attr).toEqual({ name: 'nickname', type: 'string' });
    expect('description' in attr).toBe(false);
  });

  test('an empty description is kept (it is set, just empty)', async () => {
    const a = await account();
    await createAttribute(t.db.sql, a.id, 'blank', 'string', '');
    expect((await a.schema()).body.attributes[2]).toEqual({ name: 'blank', type: 'string', description: '' });
  });

  test("another account's attributes are not in the schema", async () => {
    const a = await account();
    const b = await account();
    await createAttribute(t.db.sql, b.id, 'theirs', 'string');
    await createAttribute(t.db.sql, a.id, 'mine', 'string');
    expect((await a.schema()).body.attributes.map((x: { name: string }) => x.name)).toEqual(['Email', 'Brand', 'mine']);
    expect((await b.schema()).body.attributes.map((x: { name: string }) => x.name)).toEqual([
      'Email',
      'Brand',
      'theirs',
    ]);
  });

  test('needs a key (401) with the contacts:read scope (403)', async () => {
    const a = await account();
    expectProblem(await t.call('GET', '/v1/contact-schema', { key: null }), 401, 'authentication_error');
    const brandsOnly = await createKey(t.db.sql, a.id, ['brands:read']);
    expectProblem(await t.call('GET', '/v1/contact-schema', { key: brandsOnly }), 403, 'permission_error');
  });
});

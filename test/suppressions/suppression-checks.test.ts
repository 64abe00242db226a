// POST /v1/suppression-checks (issue 37, item 3), against a real database; the cluster pass runs it on Citus.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { buildApp } from '../../src/app';
import { connect } from '../../src/db';
import { expectProblem, testApp, type TestApp } from '../helpers/app';
import { createAccount, createKey, createSuppressionList } from '../helpers/fixtures';

let t: TestApp;
beforeAll(async () => {
  t = await testApp();
});
afterAll(() => t.close());

const md5 = (s: string) => createHash('md5').update(s).digest('hex');
const sha512 = (s: string) => createHash('sha512').update(s).digest('hex');
type Format = 'plain text' | 'md5' | 'sha512';

/** A fresh account with its own key, so each test sees only its own lists. */
async function account() {
  const id = await createAccount(t.db.sql);
  const key = await createKey(t.db.sql, id);
  const list = async (format: Format, records: string[], extra: { isGlobal?: boolean; offerId?: string } = {}) => {
    const listId = await createSuppressionList(t.db.sql, id, `list ${crypto.randomUUID()}`, format, extra);
    if (records.length) {
      const res = await t.call('POST', `/v1/suppression-lists/${listId}/records`, { key, body: { records } });
      expect(res.status).toBe(200);
    }
    return listId;
  };
  const check = (emails: unknown, k = key) => t.call('POST', '/v1/suppression-checks', { key: k, body: { emails } });
  return { id, key, list, check };
}

const answer = (email: string, ...ids: string[]) => ({ email, suppressed: ids.length > 0, suppressionListIds: ids });

describe('POST /v1/suppression-checks: each format', () => {
  test('a plain-text list holds the address as add-records stored it: trimmed, lowercased, both sides', async () => {
    const a = await account();
    const list = await a.list('plain text', [' Ann@Example.COM ', 'bob@example.org']);
    const res = await a.check(['ann@example.com', '  ANN@EXAMPLE.COM\t', 'BOB@Example.org', 'carl@example.com']);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [
        answer('ann@example.com', list),
        answer('  ANN@EXAMPLE.COM\t', list),
        answer('BOB@Example.org', list),
        answer('carl@example.com'),
      ],
    });
  });

  test('an md5 list holds the md5 of the trimmed, lowercased address', async () => {
    const a = await account();
    const list = await a.list('md5', [md5('ann@example.com').toUpperCase()]);
    const res = await a.check(['Ann@Example.com', ' ann@example.com ', 'ann@example.co']);
    expect(res.body.data).toEqual([
      answer('Ann@Example.com', list),
      answer(' ann@example.com ', list),
      answer('ann@example.co'),
    ]);
  });

  test('an md5 list is not matched by the digest of the address as sent, nor a plain list by its digest', async () => {
    const a = await account();
    await a.list('md5', [md5('Ann@Example.com')]);
    await a.list('plain text', ['ann@example.com'.replace('ann', md5('x').slice(0, 8))]);
    const res = await a.check(['Ann@Example.com']);
    expect(res.body.data).toEqual([answer('Ann@Example.com')]);
  });

  test('a sha512 list holds the sha512 of the trimmed, lowercased address', async () => {
    const a = await account();
    const list = await a.list('sha512', [sha512('ann@example.com'), sha512('bob@example.org').toUpperCase()]);
    const res = await a.check(['ANN@example.com', 'bob@EXAMPLE.org', 'carl@example.com']);
    expect(res.body.data).toEqual([
      answer('ANN@example.com', list),
      answer('bob@EXAMPLE.org', list),
      answer('carl@example.com'),
    ]);
  });
});

describe('POST /v1/suppression-checks: several lists', () => {
  test('every list of the account counts, global and offer-attached ones too, in creation order', async () => {
    const a = await account();
    const plain = await a.list('plain text', ['ann@example.com', 'bob@example.org']);
    const hashed = await a.list('md5', [md5('ann@example.com')], { isGlobal: true });
    const empty = await a.list('sha512', []);
    const long = await a.list('sha512', [sha512('ann@example.com'), sha512('dan@example.net')]);
    const offer = await a.list('md5', [md5('ann@example.com')], { offerId: 'offer-1' });
    expect(empty).toBeString();
    const res = await a.check(['dan@example.net', 'Ann@example.com', 'bob@example.org', 'eve@example.com']);
    expect(res.body.data).toEqual([
      answer('dan@example.net', long),
      answer('Ann@example.com', plain, hashed, long, offer),
      answer('bob@example.org', plain),
      answer('eve@example.com'),
    ]);
  });

  test('the order is the lists’ creation order, not the order of their ids', async () => {
    const a = await account();
    const ids: string[] = [];
    for (let i = 0; i < 6; i++)
      ids.push(await a.list(i % 2 ? 'md5' : 'plain text', i % 2 ? [md5('x@y.io')] : ['x@y.io']));
    const res = await a.check(['x@y.io']);
    expect(res.body.data[0].suppressionListIds).toEqual(ids);
  });

  test("another account's lists never count, even holding the same address", async () => {
    const other = await account();
    await other.list('plain text', ['ann@example.com']);
    await other.list('md5', [md5('ann@example.com')]);
    const a = await account();
    const own = await a.list('sha512', [sha512('bob@example.org')]);
    const res = await a.check(['ann@example.com', 'bob@example.org']);
    expect(res.body.data).toEqual([answer('ann@example.com'), answer('bob@example.org', own)]);
  });

  test('an account without lists answers every address unsuppressed', async () => {
    const a = await account();
    const res = await a.check(['ann@example.com']);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: [answer('ann@example.com')] });
  });
});

describe('POST /v1/suppression-checks: order and repeats', () => {
  test('answers in request order, each repeat in its place, with the email exactly as sent', async () => {
    const a = await account();
    const list = await a.list('plain text', ['b@example.com']);
    const emails = [
      'c@example.com',
      'b@example.com',
      ' B@Example.com',
      'c@example.com',
      'b@example.com',
      'a@example.com',
    ];
    const res = await a.check(emails);
    expect(res.body.data.map((d: { email: string }) => d.email)).toEqual(emails);
    expect(res.body.data.map((d: { suppressed: boolean }) => d.suppressed)).toEqual([
      false,
      true,
      true,
      false,
      true,
      false,
    ]);
    expect(res.body.data[2]).toEqual(answer(' B@Example.com', list));
  });

  test('1000 addresses, a third of them suppressed, each answered right', async () => {
    const a = await account();
    const suppressed = Array.from({ length: 1000 }, (_, i) => `user${i}@example.com`).filter((_, i) => i % 3 === 0);
    const list = await a.list('md5', suppressed.map(md5));
    const emails = Array.from({ length: 1000 }, (_, i) => `User${i}@Example.com`);
    const res = await a.check(emails);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual(emails.map((e, i) => (i % 3 === 0 ? answer(e, list) : answer(e))));
  });
});

describe('POST /v1/suppression-checks: errors', () => {
  test.each([
    ['no @', 'ann.example.com'],
    ['no dotted domain', 'ann@example'],
    ['an empty string', ''],
    ['spaces only', '   '],
    ['an inner space', 'ann smith@example.com'],
    ['two @', 'ann@bob@example.com'],
    ['a non-ASCII address', 'änn@example.com'],
    ['a 255-character address', `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}`],
  ])('400 at /emails/<index> for %s', async (_, email) => {
    const a = await account();
    const body = expectProblem(await a.check(['ok@example.com', email]), 400, 'invalid_request_error');
    expect(body.errors).toEqual([{ detail: expect.any(String), pointer: '/emails/1' }]);
  });

  test('400 names every failing index, one errors entry each, the first first', async () => {
    const a = await account();
    const body = expectProblem(await a.check(['x', 'ok@example.com', 'y@', 'z@z']), 400, 'invalid_request_error');
    expect(body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(['/emails/0', '/emails/2', '/emails/3']);
    expect(body.detail).toContain('0, 2, 3');
  });

  test('400 at /emails/<index> for an entry that is not a string', async () => {
    const a = await account();
    const body = expectProblem(await a.check(['ok@example.com', 42]), 400, 'invalid_request_error');
    expect(body.errors[0].pointer).toBe('/emails/1');
  });

  test.each([
    ['an empty list', []],
    ['1001 entries', Array.from({ length: 1001 }, (_, i) => `u${i}@example.com`)],
    ['a string', 'ann@example.com'],
    ['an object', { 0: 'ann@example.com' }],
    ['null', null],
  ])('400 at /emails for %s', async (_, emails) => {
    const a = await account();
    const body = expectProblem(await a.check(emails), 400, 'invalid_request_error');
    expect(body.errors[0].pointer).toBe('/emails');
  });

  test('1000 entries are accepted', async () => {
    const a = await account();
    const res = await a.check(Array.from({ length: 1000 }, (_, i) => `u${i}@example.com`));
    expect(res.status).toBe(200);
    expect(res.body.data.length).toBe(1000);
  });

  test('400 at /emails when missing, at /<field> for an unknown field, for a body that is no object', async () => {
    const a = await account();
    const call = (body: unknown) => t.call('POST', '/v1/suppression-checks', { key: a.key, body });
    expect(expectProblem(await call({}), 400, 'invalid_request_error').errors[0].pointer).toBe('/emails');
    const unknown = expectProblem(
      await call({ emails: ['a@example.com'], email: 'b@example.com' }),
      400,
      'invalid_request_error',
    );
    expect(unknown.errors).toEqual([{ detail: 'Unknown field email.', pointer: '/email' }]);
    expectProblem(await call(['a@example.com']), 400, 'invalid_request_error');
  });

  test('401 without a key; 403 with a key lacking suppressions:read, also for a malformed body', async () => {
    const a = await account();
    expectProblem(await a.check(['a@example.com'], null as unknown as string), 401, 'authentication_error');
    for (const scopes of [['suppressions:write'], ['contacts:read', 'contacts:write']]) {
      const key = await createKey(t.db.sql, a.id, scopes);
      expectProblem(await a.check(['a@example.com'], key), 403, 'permission_error');
      expectProblem(await a.check([], key), 403, 'permission_error');
    }
    const reader = await createKey(t.db.sql, a.id, ['suppressions:read']);
    expect((await a.check(['a@example.com'], reader)).status).toBe(200);
  });

  test('GET is no route of it', async () => {
    const a = await account();
    const res = await t.call('GET', '/v1/suppression-checks', { key: a.key });
    expect([404, 405]).toContain(res.status);
  });
});

describe('on a Citus cluster (the second pass of test/run.ts)', () => {
  test("the check is one statement per list format, each on the account's node", async () => {
    const [citus] = await t.db.sql`select 1 from pg_extension where extname = 'citus'`;
    if (!citus) return; // one PostgreSQL: nothing to route
    const a = await account();
    const list = await a.list('plain text', ['ann@example.com']);
    await a.list('md5', [md5('bob@example.org')]);
    await a.list('sha512', [sha512('ann@example.com')]);
    const sent: { query: string; params: unknown[] }[] = [];
    const sql = connect(t.db.url, 2, { debug: (_c, query, params) => sent.push({ query, params }) });
    try {
      const app = buildApp({ ...t.deps, sql });
      const init = {
        method: 'POST',
        headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ emails: ['Ann@example.com', 'bob@example.org', 'x@example.com'] }),
      };
      const res = await app.handle(new Request('http://localhost/v1/suppression-checks', init));
      expect(res.status).toBe(200);
      const body = (await res.json()) as { data: { suppressionListIds: string[] }[] };
      expect(body.data[0]!.suppressionListIds[0]).toBe(list);
      expect(body.data.map((d) => d.suppressionListIds.length)).toEqual([2, 1, 0]);
      // One statement per format of the account's lists, each on the account's node alone.
      const ours = sent.filter((s) => /\bsuppression_records\b/.test(s.query));
      expect(ours.length).toBe(3);
      for (const { query, params } of ours) {
        // The statement with its parameters written in (the values hold no quote or comma).
        const literal = (v: unknown) =>
          Array.isArray(v)
            ? `'{${v.map((x) => `"${String(x).replaceAll('\\', '\\\\')}"`).join(',')}}'`
            : `'${String(v)}'`;
        const inlined = query.replace(/\$(\d+)/g, (_, k: string) => literal(params[Number(k) - 1]));
        const rows = await sql.unsafe<{ 'QUERY PLAN': string }[]>(`explain (costs off) ${inlined}`);
        const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
        expect(plan).toMatch(/Task Count: 1\n/);
        expect(plan).not.toMatch(/Distributed Subplan|repartition/i);
      }
    } finally {
      await sql.end();
    }
  });
});

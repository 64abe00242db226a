// A corpus of malformed requests (test/helpers/malformed-corpus.ts) sent over raw TCP to the API as
// src/index.ts serves it: no 5xx, no dropped connection the app could have answered, and every
// refusal a problem+json with the right code, pointer and parameter (the upload link: S3 XML).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ALL_SCOPES, type Scope } from '../../src/auth/scopes';
import { problemOf, serveTestApi, type RawAnswer, type ServedApi } from '../helpers/api-server';
import {
  createAccount,
  createAttribute,
  createBrand,
  createKey,
  createSuppressionList,
  revokeKey,
  suspendAccount,
} from '../helpers/fixtures';
import { malformedCorpus, type CorpusCase, type CorpusContext, type Expected } from '../helpers/malformed-corpus';
import { DOCS_URL } from '../helpers/app';

const LIMIT = 32 * 1024;
let api: ServedApi;
let corpus: CorpusCase[];
const answers = new Map<CorpusCase, RawAnswer>();

beforeAll(async () => {
  api = await serveTestApi({ BODY_LIMIT_BYTES: String(LIMIT) });
  const sql = api.db.sql;
  const brandId = await createBrand(sql, api.accountId, 'Corpus brand');
  const listId = await createSuppressionList(sql, api.accountId, 'Corpus list', 'plain text');
  for (const [name, type] of [
    ['firstName', 'string'],
    ['age', 'number'],
    ['vip', 'boolean'],
    ['tags', 'array'],
    ['contactEmail', 'email'],
  ]) {
    await createAttribute(sql, api.accountId, name!, type!);
  }
  const keyWithout = {} as Record<Scope, string>;
  for (const scope of ALL_SCOPES)
    keyWithout[scope] = await createKey(
      sql,
      api.accountId,
      ALL_SCOPES.filter((s) => s !== scope),
    );
  const revokedKey = await createKey(sql, api.accountId);
  await revokeKey(sql, revokedKey);
  const suspended = await createAccount(sql, 'Suspended corpus account');
  const suspendedKey = await createKey(sql, suspended);
  await suspendAccount(sql, suspended);
  const [, id] = api.key.split('_');
  // An upload link of an import that exists (the corpus only ever sends it malformed or misused).
  const created = await fetch(`http://127.0.0.1:${api.port}/v1/contact-imports`, {
    method: 'POST',
    headers: { authorization: `Bearer ${api.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ columns: ['Email'], duplicateContactStrategy: 'overwrite' }),
  });
  expect(created.status).toBe(201);
  const uploadToken = new URL(((await created.json()) as { uploadUrl: string }).uploadUrl).pathname.slice(
    '/uploads/'.length,
  );
  const ctx: CorpusContext = {
    key: api.key,
    keyWithout,
    noScopeKey: await createKey(sql, api.accountId, []),
    revokedKey,
    suspendedKey,
    wrongSecretKey: `ck_${id}_${'x'.repeat(40)}`,
    brandId,
    listId,
    // A contact that exists, so a refusal is never just the 404 of a missing one.
    md5: await createContact(),
    uploadToken,
  };
  corpus = malformedCorpus(ctx, LIMIT);
  // A few connections at a time: the machine is shared.
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < corpus.length) {
        const c = corpus[next++]!;
        answers.set(c, await api.raw(c.request));
      }
    }),
  );
});
afterAll(() => api.close());

async function createContact(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${api.port}/v1/contacts`, {
    method: 'POST',
    headers: { authorization: `Bearer ${api.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'existing@example.com', attributes: { firstName: 'Existing' } }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { emailMd5: string }).emailMd5;
}

/** Why an answer does not meet its expectation, or undefined when it does. */
function mismatch(expected: Expected, a: RawAnswer): string | undefined {
  const got = `${a.status} ${a.headers.get('content-type') ?? '-'} ${a.body.slice(0, 200)}`;
  switch (expected.kind) {
    case 'problem': {
      const p = problemOf(a);
      if (
        a.status !== expected.status ||
        p?.code !== expected.code ||
        p?.status !== expected.status ||
        p?.type !== `${DOCS_URL}/error-codes#${expected.code}`
      ) {
        return `expected ${expected.status} ${expected.code}, got ${got}`;
      }
      if (typeof p.title !== 'string' || typeof p.detail !== 'string') return `incomplete problem: ${got}`;
      const errors: Array<{ pointer?: string; parameter?: string }> = p.errors ?? [];
      const ptr = expected.pointer;
      if (
        ptr !== undefined &&
        !errors.some((e) => e.pointer === ptr || (ptr !== '' && e.pointer?.startsWith(`${ptr}/`)))
      )
        return `expected pointer ${ptr}, got ${got}`;
      if (expected.parameter !== undefined && !errors.some((e) => e.parameter === expected.parameter))
        return `expected parameter ${expected.parameter}, got ${got}`;
      return undefined;
    }
    case 'ok':
      return a.status === expected.status ? undefined : `expected ${expected.status}, got ${got}`;
    case 's3':
      return a.status === expected.status &&
        a.headers.get('content-type') === 'application/xml' &&
        a.body.includes(`<Code>${expected.code}</Code>`)
        ? undefined
        : `expected ${expected.status} ${expected.code} XML, got ${got}`;
    case 'runtime':
      if (expected.status === 0) return a.bytes === 0 ? undefined : `expected a closed connection, got ${got}`;
      return a.status === expected.status && a.body === ''
        ? undefined
        : `expected the runtime's empty ${expected.status}, got ${got}`;
  }
}

const GROUPS = ['keys', 'path ids', 'bodies', 'body fields', 'attributes', 'query', 'routing', 'uploads', 'wire'];

describe('The malformed-request corpus', () => {
  test('holds at least 500 requests and covers every group', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(500);
    expect([...new Set(corpus.map((c) => c.group))].sort()).toEqual([...GROUPS].sort());
  });

  test('no request the app answers gets a 5xx', () => {
    const fives = corpus
      .filter((c) => c.expected.kind !== 'runtime' && answers.get(c)!.status >= 500)
      .map((c) => `${c.group}: ${c.name} → ${answers.get(c)!.body.slice(0, 200)}`);
    expect(fives).toEqual([]);
  });

  test('no connection is dropped but those the runtime refuses before the app (unknown methods)', () => {
    const dropped = corpus
      .filter((c) => answers.get(c)!.bytes === 0 && !(c.expected.kind === 'runtime' && c.expected.status === 0))
      .map((c) => `${c.group}: ${c.name}`);
    expect(dropped).toEqual([]);
  });

  test('no refusal from the app is HTML or plain text', () => {
    const other = corpus
      .filter((c) => c.expected.kind !== 'runtime' && answers.get(c)!.status >= 400)
      .filter((c) => !/^application\/(problem\+json|xml)/.test(answers.get(c)!.headers.get('content-type') ?? ''))
      .map((c) => `${c.group}: ${c.name} → ${answers.get(c)!.headers.get('content-type')}`);
    expect(other).toEqual([]);
  });

  const wrongAnswers = (cases: CorpusCase[]) =>
    cases
      .map((c) => [c.name, mismatch(c.expected, answers.get(c)!)] as const)
      .filter(([, why]) => why !== undefined)
      .map(([name, why]) => `${name}: ${why}`);

  for (const group of GROUPS) {
    test(`${group}: every answer is the one expected`, () => {
      expect(wrongAnswers(corpus.filter((c) => c.group === group))).toEqual([]);
    });
  }

  test('nothing the corpus sent was written', async () => {
    const [row] = await api.db.sql`
      select (select count(*)::int from contacts) as contacts,
             (select count(*)::int from suppression_imports) as suppression_imports,
             (select count(*)::int from contact_imports) as contact_imports`;
    expect(row).toEqual({ contacts: 1, suppression_imports: 0, contact_imports: 1 });
  });
});

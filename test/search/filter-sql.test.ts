/**
 * The filter compiler (src/search/compile.ts) against a real PostgreSQL: for each operator, the
 * contacts a compiled filter matches among a handful made by hand, mistyped stored values among
 * them (written by other hands: they count as absent). Each filter runs with bound parameters and
 * with inline literals (as COPY takes it); its `not` must match exactly the rest (two-valued logic).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { derivedOf } from '../../src/contacts/email';
import { boundParams, compileFilter, inlineParams, type PgType } from '../../src/search/compile';
import { parseFilter, type FilterSchema } from '../../src/search/filter';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { createAccount } from '../helpers/fixtures';

const schema: FilterSchema = {
  custom: [
    { name: 'firstName', type: 'string' },
    { name: 'Age', type: 'number' },
    { name: 'vip', type: 'boolean' },
    { name: 'altEmail', type: 'email' },
    { name: 'tags', type: 'array' },
  ],
};
const B1 = '11111111-1111-4111-8111-111111111111';
const B2 = '22222222-2222-4222-8222-222222222222';
const B3 = '33333333-3333-4333-8333-333333333333';
const TRICKY = "Zoë's \\ 😀 $1 '; --";

/** The hand-made contacts, by a one-letter name. */
const CONTACTS: Record<string, { email: string; attributes: string; brands: string[]; enabled: boolean; at: string }> =
  {
    a: {
      email: 'Ann@Example.com',
      attributes:
        '{"firstName": "Ann", "Age": 30, "vip": true, "altEmail": "Ann.Work@Corp.IO", "tags": ["red", "blue"]}',
      brands: [B1],
      enabled: true,
      at: '2026-01-01T00:00:00Z',
    },
    b: {
      email: 'bob@example.org',
      attributes: `{"firstName": "Bob", "Age": 30.0, "vip": false, "altEmail": "bob@corp.io", "tags": ["green"]}`,
      brands: [B1, B2],
      enabled: false,
      at: '2026-02-01T00:00:00Z',
    },
    // every attribute of another JSON type than its own: absent to every operator
    c: {
      email: 'cy@gmail.com',
      attributes: `{"firstName": "ann", "Age": "30", "vip": "true", "altEmail": 5, "tags": "red"}`,
      brands: [],
      enabled: true,
      at: '2026-03-01T00:00:00Z',
    },
    d: { email: 'dee@GMAIL.com', attributes: '{}', brands: [B2], enabled: true, at: '2026-03-15T00:00:00Z' },
    e: {
      email: 'eve@x.co',
      attributes: `{"firstName": ["Ann"], "Age": 45.5, "tags": ["Red", "x"], "altEmail": "EVE@Gmail.Com"}`,
      brands: [],
      enabled: false,
      at: '2026-04-01T00:00:00.000500Z',
    },
    f: {
      email: 'f@f.fr',
      attributes: JSON.stringify({ firstName: TRICKY }),
      brands: [],
      enabled: true,
      at: '2026-05-01T00:00:00Z',
    },
  };
const ALL = Object.keys(CONTACTS);
const leaf = (attribute: string, op: string, value?: unknown) => ({ attribute, op, value });
const has = (attribute: string) => ({ attribute, op: 'exists' });
const hex = (name: string, key: string, address: string) => derivedOf(name, address)[`${name}:${key}`]!;

/** [filter, the contacts it matches]. */
const CASES: [unknown, string[]][] = [
  [{ enabled: true }, ['a', 'c', 'd', 'f']],
  [{ enabled: false }, ['b', 'e']],
  [{ createdAt: { gte: '2026-02-01T00:00:00Z' } }, ['b', 'c', 'd', 'e', 'f']],
  [{ createdAt: { lt: '2026-03-01T00:00:00+00:00' } }, ['a', 'b']],
  [{ createdAt: { gte: '2026-02-01T01:00:00+01:00', lt: '2026-03-15T00:00:00Z' } }, ['b', 'c']],
  // bounds are read to the millisecond (src/search/filter.ts instantOf): .0009 is .000
  [{ createdAt: { gte: '2026-04-01T00:00:00.0009Z', lt: '2026-04-02T00:00:00Z' } }, ['e']],
  [has('firstName'), ['a', 'b', 'c', 'f']],
  [leaf('firstName', 'eq', 'Ann'), ['a']],
  [leaf('firstName', 'eq', TRICKY), ['f']],
  [leaf('firstName', 'ne', 'Ann'), ['b', 'c', 'f']],
  [leaf('firstName', 'in', ['ann', 'Bob', 'nobody']), ['b', 'c']],
  [leaf('firstName', 'prefix', 'A'), ['a']],
  [leaf('firstName', 'prefix', "Zoë's \\"), ['f']],
  [has('age'), ['a', 'b', 'e']],
  [leaf('Age', 'eq', 30), ['a', 'b']],
  [leaf('Age', 'ne', 30), ['e']],
  [leaf('Age', 'in', [45.5, 1]), ['e']],
  [leaf('Age', 'gt', 30), ['e']],
  [leaf('Age', 'gte', 30), ['a', 'b', 'e']],
  [leaf('Age', 'lt', 45.5), ['a', 'b']],
  [leaf('Age', 'lte', 45.5), ['a', 'b', 'e']],
  [leaf('Age', 'lt', -1e21), []],
  [has('vip'), ['a', 'b']],
  [leaf('vip', 'eq', true), ['a']],
  [leaf('vip', 'eq', false), ['b']],
  [has('altEmail'), ['a', 'b', 'e']],
  [leaf('altEmail', 'eq', 'ann.work@CORP.io'), ['a']],
  [leaf('altEmail', 'in', ['BOB@corp.io', 'eve@gmail.com']), ['b', 'e']],
  [leaf('altEmail', 'domain', 'CORP.io'), ['a', 'b']],
  [has('altEmail:md5'), ['a', 'b', 'e']],
  [leaf('altEmail:md5', 'eq', hex('x', 'md5', 'Ann.Work@Corp.IO')), ['a']],
  [leaf('altEmail:MD5', 'eq', hex('x', 'md5', 'Ann.Work@Corp.IO').toUpperCase()), []],
  [leaf('altEmail:sha256', 'eq', hex('x', 'sha256', 'EVE@Gmail.Com')), ['e']],
  [leaf('altEmail:sha512', 'in', [hex('x', 'sha512', 'bob@corp.io'), 'ff']), ['b']],
  [leaf('altEmail:sha512', 'prefix', hex('x', 'sha512', 'bob@corp.io').slice(0, 6)), ['b']],
  [leaf('altEmail:domain', 'eq', 'corp.io'), ['a', 'b']],
  [leaf('altEmail:domain', 'ne', 'corp.io'), ['e']],
  [leaf('altEmail:domain', 'prefix', 'gm'), ['e']],
  [has('tags'), ['a', 'b', 'e']],
  [leaf('tags', 'contains', 'red'), ['a']],
  [leaf('tags', 'containsAny', ['green', 'x', 'nope']), ['b', 'e']],
  [has('Email'), ALL],
  [leaf('Email', 'eq', 'ANN@example.com'), ['a']],
  [leaf('email', 'in', ['dee@gmail.com', 'nobody@x.yz']), ['d']],
  [leaf('Email', 'domain', 'GMAIL.com'), ['c', 'd']],
  [has('Brand'), ['a', 'b', 'd']],
  [leaf('Brand', 'contains', B1), ['a', 'b']],
  [leaf('Brand', 'containsAny', [B2.toUpperCase(), B3]), ['b', 'd']],
  [{ and: [{ enabled: true }, { or: [leaf('Age', 'gt', 40), leaf('firstName', 'eq', 'Ann')] }] }, ['a']],
  [{ not: leaf('firstName', 'eq', 'Ann') }, ['b', 'c', 'd', 'e', 'f']],
  [{ or: [{ not: has('Age') }, leaf('vip', 'eq', true)] }, ['a', 'c', 'd', 'f']],
  [{ and: [{ not: { not: has('tags') } }, { not: leaf('Brand', 'contains', B1) }] }, ['e']],
];

describe('compileFilter on PostgreSQL', () => {
  let db: TestDatabase;
  let accountId: string;
  const nameOf = new Map<string, string>();

  beforeAll(async () => {
    db = await createTestDatabase();
    accountId = await createAccount(db.sql);
    // Another account's contacts match the same filters: the caller's account_id keeps them out.
    const otherId = await createAccount(db.sql, 'Other');
    for (const [account, prefix] of [
      [accountId, ''],
      [otherId, 'other-'],
    ] as const)
      for (const [name, c] of Object.entries(CONTACTS)) {
        const email = prefix + c.email;
        nameOf.set(email, prefix + name);
        await db.sql`
          insert into contacts (account_id, email_md5, email, attributes, brand_ids, enabled, created_at, first_source)
          values (${account}, md5(lower(trim(${email})))::uuid, ${email}, ${c.attributes}::text::jsonb,
                  ${c.brands}::uuid[], ${c.enabled}, ${c.at}, 'api')`;
      }
  });

  afterAll(async () => {
    await db?.drop();
  });

  /** The contacts `where` matches, and how many rows it left NULL. */
  async function run(
    where: string,
    values: readonly unknown[],
    prepare = true,
  ): Promise<{ names: string[]; nulls: number }> {
    const rows = await db.sql.unsafe<{ email: string; matched: boolean | null }[]>(
      `select c.email, ${where} as matched from contacts c where c.account_id = $1 order by c.email`,
      [accountId, ...values] as never[],
      { prepare },
    );
    const names = rows.filter((r) => r.matched === true).map((r) => nameOf.get(r.email)!);
    return { names: names.sort(), nulls: rows.filter((r) => r.matched === null).length };
  }

  for (const [raw, expected] of CASES) {
    test(`${JSON.stringify(raw)} matches ${expected.join(', ') || 'none'}`, async () => {
      const node = parseFilter(raw, schema);
      const bound = boundParams(2);
      const boundSql = compileFilter(node, bound);
      const inlineSql = compileFilter(node, inlineParams());
      const rest = ALL.filter((n) => !expected.includes(n));
      for (const [where, values] of [
        [boundSql, bound.values],
        [inlineSql, []],
      ] as const) {
        expect(await run(where, values)).toEqual({ names: expected, nulls: 0 });
        expect(await run(`(not ${where})`, values)).toEqual({ names: rest, nulls: 0 });
      }
      // unprepared, postgres.js types each value from JavaScript: the casts must read them the same
      expect(await run(boundSql, bound.values, false)).toEqual({ names: expected, nulls: 0 });
    });
  }

  test('no request text reaches the SQL text, bound or inline', () => {
    const node = parseFilter(
      {
        and: [
          leaf('firstName', 'eq', TRICKY),
          leaf('FIRSTNAME', 'in', ['Zoë']),
          { createdAt: { gte: '2026-01-01T00:00:00Z' } },
        ],
      },
      schema,
    );
    const bound = boundParams(2);
    const texts = [compileFilter(node, bound), compileFilter(node, inlineParams())];
    for (const text of texts) {
      expect(text).not.toContain('firstName');
      expect(text).not.toContain('Zo');
      expect(text).not.toContain("'; --");
    }
    expect(texts[0]).toContain('$2::text');
    expect(bound.values).toContain(TRICKY);
  });

  test('every parameter type reads the same bound (prepared or not) and inline', async () => {
    // [value, type, the same value as PostgreSQL's own text of the type]
    const samples: [unknown, PgType, string][] = [
      [TRICKY, 'text', TRICKY],
      [['a', 'b c'], 'text[]', '{a,"b c"}'],
      [-1.5e-7, 'numeric', '-0.00000015'],
      [[1, 2.5], 'numeric[]', '{1,2.5}'],
      [{ k: [TRICKY, 1, true] }, 'jsonb', JSON.stringify({ k: [TRICKY, 1, true] })],
      [TRICKY, 'jsonb', JSON.stringify(TRICKY)],
      [B1.toUpperCase(), 'uuid', B1],
      [[B1, B2], 'uuid[]', `{${B1},${B2}}`],
      ['2026-01-02T05:04:05.1239+02:00', 'timestamptz', '2026-01-02T03:04:05.123Z'],
      [false, 'boolean', 'false'],
    ];
    for (const [value, type, text] of samples) {
      const bound = boundParams(2);
      const placeholder = bound.add(value, type);
      const inline = inlineParams().add(value, type);
      const same = `select ${placeholder} = $1::text::${type} as bound, ${inline} = $1::text::${type} as inline`;
      for (const prepare of [true, false]) {
        const [row] = await db.sql.unsafe<{ bound: boolean; inline: boolean }[]>(
          same,
          [text, ...bound.values] as never[],
          {
            prepare,
          },
        );
        expect({ type, ...row }).toEqual({ type, bound: true, inline: true });
      }
    }
  });

  test('Email eq and in are answered by the primary key', async () => {
    const node = parseFilter(leaf('Email', 'in', ['ann@example.com', 'bob@example.org']), schema);
    const bound = boundParams(2);
    const plan = await db.sql.begin(async (tx) => {
      await tx`set local enable_seqscan = off`;
      return tx.unsafe<{ 'QUERY PLAN': string }[]>(
        `explain select c.email from contacts c where c.account_id = $1 and ${compileFilter(node, bound)}`,
        [accountId, ...bound.values] as never[],
      );
    });
    expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toContain('contacts_pkey');
  });
});

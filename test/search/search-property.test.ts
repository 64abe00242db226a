/**
 * Searches, counts and stats agree with an in-memory evaluation of the same filter (issue 56 item 8;
 * docs/searching.md). Each run makes two fresh accounts with the same schema (a string, a number, a
 * boolean, an email and a list attribute, their names in mixed case) and brands, and writes through
 * the API only:
 * - account A: random contacts (POST /v1/contacts, some in capitals, with attributes of every type and
 *   brands), one small import (POST /v1/contact-imports, the upload link, the pipeline) that adds
 *   contacts and overwrites some, a brand deleted (its id stays on contacts), then random patches
 *   (values set and removed), disables, brand adds and removals and erasures (DELETE, and POST
 *   /v1/contact-erasures of two);
 * - account B: contacts whose addresses are some of A's, with other attributes and brands.
 * The contacts the oracle sees are those GET /v1/contacts/{emailMd5} gives for every address ever
 * written. Then for random filters of every form and operator, nested up to the 5 levels allowed
 * (attribute names in random case; values drawn from the pools the contacts were drawn from, so that
 * filters match something), in each account:
 * - the search's pages (a random pageSize, joined through `next`) are exactly the oracle's contacts,
 *   by emailMd5 ascending, each deep-equal to its GET: so a search never returns the other account's;
 * - POST /v1/contact-counts is the oracle's count: so a count never counts the other account's;
 * - GET /v1/contact-stats is the tally of the GET contacts: total, enabled, disabled, each live brand.
 * Seed 56: 40 runs (10 on the cluster) × (18 contacts created + 3 imported, 2 of them overwritten by
 * the import, 10 operations) in A and 6 contacts in B; 12 filters (an eighth of them none) in each.
 */
import { expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { setLogLevel } from '../../src/log';
import { runImport } from '../../worker/import/index';
import { createAccount, createAttribute, createBrand, createKey } from '../helpers/fixtures';
import { testConfig } from '../helpers/file-store';
import { csvLine, parityBed } from '../helpers/parity';
import { evaluate, statsOf, type ApiContact, type Filter, type OracleSchema } from '../helpers/filter-oracle';

setLogLevel('warn');
const bed = parityBed();

const SEED = 56;
/** On the Citus cluster each write and search costs about 3× what it does on one PostgreSQL: fewer runs there. */
const ON_CLUSTER = Boolean(process.env.TEST_CITUS_WORKERS);
const RUNS = ON_CLUSTER ? 10 : 40;
const CONTACTS = 18;
const IMPORT_NEW = 3;
const IMPORT_EXISTING = 2;
const B_CONTACTS = 6;
const OPS = 10;
const FILTERS = 12;
const BRANDS = 4;
/** The brand of each account deleted after the contacts got it: filters may name it, stats do not list it. */
const DELETED_BRAND = 3;

const SCHEMA: OracleSchema = { Tier: 'string', age: 'number', vip: 'boolean', work: 'email', Tags: 'array' };

// Value pools: contacts and filters draw from the same ones, so that a filter matches something.
// `%`, `_` and `\` are LIKE's own characters: a prefix is literal text.
const TIERS = ['gold', 'Gold', 'gold plus', 'silver', 's', 'platinum', 'é', '😀x', 'go%ld', 'a_b', 'back\\slash'];
const PREFIXES = [
  'g',
  'go',
  'Go',
  'gold',
  'gold ',
  's',
  'p',
  'é',
  '😀',
  'zz',
  '%',
  '_',
  'go%',
  'a_',
  'g_',
  '\\',
  'back\\',
];
const AGES = [-5, 0, 1, 2.5, 18, 30, 30.5, 65, 1e10];
const LOCALS = ['ann', 'Bob', 'c.d', 'EVE', 'fay+x', 'gus'];
const DOMAINS = ['example.com', 'Example.COM', 'mail.example.com', 'gmail.com', 'x.io'];
const TAGS = ['a', 'b', 'B', 'c d', 'x'];

const address = (i: number, domain: number, caps: boolean) => {
  const a = `${LOCALS[i % LOCALS.length]}${i}@${DOMAINS[domain]}`;
  return caps ? a.toUpperCase() : a;
};
const lowerHex = (algorithm: string, text: string) => createHash(algorithm).update(text.toLowerCase()).digest('hex');
const md5 = (email: string) => lowerHex('md5', email.trim());

const caseOf = fc.constantFrom<(s: string) => string>(
  (s) => s,
  (s) => s.toUpperCase(),
  (s) => s.toLowerCase(),
  (s) => [...s].map((ch, i) => (i % 2 ? ch.toUpperCase() : ch.toLowerCase())).join(''),
);
const tier = fc.constantFrom(...TIERS);
const age = fc.constantFrom(...AGES);
const work = fc
  .tuple(fc.constantFrom(...LOCALS), fc.constantFrom(...DOMAINS), fc.boolean())
  .map(([l, d, caps]) => (caps ? `${l}@${d}`.toUpperCase() : `${l}@${d}`));
const tags = fc.uniqueArray(fc.constantFrom(...TAGS), { minLength: 1, maxLength: 3 });

const VALUES = { Tier: tier, age, vip: fc.boolean(), work, Tags: tags } as const;
const attributes = fc.record(VALUES, { requiredKeys: [] });
/** A merge patch: a value sets, null removes. */
const patch = fc.record(
  Object.fromEntries(Object.entries(VALUES).map(([k, v]) => [k, fc.option(v as fc.Arbitrary<unknown>, { nil: null })])),
  { requiredKeys: [] },
);
const brandSet = fc.subarray([...Array(BRANDS).keys()]);

const contact = fc.record({
  domain: fc.nat(DOMAINS.length - 1),
  caps: fc.boolean(),
  attributes,
  brands: brandSet,
});

/** An operation on the contact at `target` (modulo the addresses written so far). */
const operation = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('patch' as const), target: fc.nat(), attributes: patch }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('disable' as const), target: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('addBrands' as const),
      target: fc.nat(),
      brands: fc.subarray([0, 1, 2], { minLength: 1 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('removeBrand' as const), target: fc.nat(), brand: fc.nat(BRANDS - 1) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('erase' as const), target: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('eraseMany' as const), target: fc.nat(), also: fc.nat() }),
  },
);

const importRow = fc.record({ domain: fc.nat(DOMAINS.length - 1), attributes, brands: fc.subarray([0, 1, 2]) });

// Filters. Two things are only known once the contacts are written: brand ids and creation times.
// A leaf names them by reference (`@brand:<i>`; `{at, deltaMs, zone}`), resolved per account.
interface TimeRef {
  at: number;
  deltaMs: -1 | 0 | 1;
  zone: 'Z' | '+02:00' | '-05:30';
}
const timeRef: fc.Arbitrary<TimeRef> = fc.record({
  at: fc.nat(),
  deltaMs: fc.constantFrom(-1, 0, 1),
  zone: fc.constantFrom('Z', '+02:00', '-05:30'),
});
const brandRef = fc.nat(BRANDS - 1).map((b) => `@brand:${b}`);
const list = <T>(a: fc.Arbitrary<T>) => fc.array(a, { minLength: 1, maxLength: 4 });
const leafOf = (name: string, op: string, value?: fc.Arbitrary<unknown>) =>
  fc
    .tuple(caseOf, value ?? fc.constant(undefined))
    .map(([c, v]) => (value ? { attribute: c(name), op, value: v } : { attribute: c(name), op }));

const identity = fc
  .tuple(fc.nat(CONTACTS + IMPORT_NEW - 1), fc.nat(DOMAINS.length - 1), caseOf)
  .map(([i, d, c]) => c(address(i, d, false)));
const domainValue = fc.tuple(fc.constantFrom(...DOMAINS, 'nomatch.org', 'example'), caseOf).map(([d, c]) => c(d));
const workValue = fc.tuple(work, caseOf).map(([w, c]) => c(w));
const hashOf = (algorithm: string) =>
  fc.oneof(
    work.map((w) => lowerHex(algorithm, w)),
    fc.constant(lowerHex(algorithm, 'nobody@nowhere.org')),
  );
const stringOps = (name: string, value: fc.Arbitrary<string>, prefix: fc.Arbitrary<string>) => [
  leafOf(name, 'exists'),
  leafOf(name, 'eq', value),
  leafOf(name, 'ne', value),
  leafOf(name, 'in', list(value)),
  leafOf(name, 'prefix', prefix),
];
const leaf: fc.Arbitrary<unknown> = fc.oneof(
  fc.record({ enabled: fc.boolean() }),
  fc.oneof(
    fc.record({ createdAt: fc.record({ gte: timeRef }) }),
    fc.record({ createdAt: fc.record({ lt: timeRef }) }),
    fc.record({ createdAt: fc.record({ gte: timeRef, lt: timeRef }) }),
  ),
  fc.oneof(...stringOps('Tier', tier, fc.constantFrom(...PREFIXES))),
  fc.oneof(
    leafOf('age', 'exists'),
    ...['eq', 'ne', 'gt', 'gte', 'lt', 'lte'].map((op) =>
      leafOf('age', op, fc.oneof(age, fc.integer({ min: -10, max: 70 }))),
    ),
    leafOf('age', 'in', list(age)),
  ),
  fc.oneof(leafOf('vip', 'exists'), leafOf('vip', 'eq', fc.boolean())),
  fc.oneof(
    leafOf('work', 'exists'),
    leafOf('work', 'eq', workValue),
    leafOf('work', 'in', list(workValue)),
    leafOf('work', 'domain', domainValue),
  ),
  fc.oneof(
    leafOf('Email', 'exists'),
    leafOf('Email', 'eq', identity),
    leafOf('Email', 'in', list(identity)),
    leafOf('Email', 'domain', domainValue),
  ),
  fc.oneof(
    leafOf('Tags', 'exists'),
    leafOf('Tags', 'contains', fc.constantFrom(...TAGS, 'none')),
    leafOf('Tags', 'containsAny', list(fc.constantFrom(...TAGS, 'none'))),
  ),
  fc.oneof(
    leafOf('Brand', 'exists'),
    leafOf('Brand', 'contains', brandRef),
    leafOf('Brand', 'containsAny', list(brandRef)),
  ),
  fc.oneof(
    ...stringOps(
      'work:domain',
      domainValue.map((d) => d.toLowerCase()),
      fc.constantFrom('ex', 'mail.', 'gmail.com', 'x', 'Ex'),
    ),
  ),
  fc.oneof(...stringOps('work:md5', hashOf('md5'), fc.constantFrom('0', 'a', '1', 'f', '9'))),
  fc.oneof(leafOf('work:sha256', 'eq', hashOf('sha256')), leafOf('work:sha256', 'prefix', fc.constantFrom('a', '0'))),
  fc.oneof(leafOf('work:sha512', 'in', list(hashOf('sha512'))), leafOf('work:sha512', 'exists')),
);

/** A filter at most `levels` deep: leaves often, and, or and not of smaller ones. */
function tree(levels: number): fc.Arbitrary<unknown> {
  if (levels <= 1) return leaf;
  const sub = tree(levels - 1);
  return fc.oneof(
    { weight: 3, arbitrary: leaf },
    { weight: 2, arbitrary: fc.array(sub, { minLength: 1, maxLength: 3 }).map((and) => ({ and })) },
    { weight: 2, arbitrary: fc.array(sub, { minLength: 1, maxLength: 3 }).map((or) => ({ or })) },
    { weight: 1, arbitrary: sub.map((not) => ({ not })) },
  );
}

const leaves = (f: any): number =>
  'and' in f
    ? f.and.reduce((n: number, g: unknown) => n + leaves(g), 0)
    : 'or' in f
      ? f.or.reduce((n: number, g: unknown) => n + leaves(g), 0)
      : 'not' in f
        ? leaves(f.not)
        : 1;
const depth = (f: any): number =>
  'and' in f
    ? 1 + Math.max(...f.and.map(depth))
    : 'or' in f
      ? 1 + Math.max(...f.or.map(depth))
      : 'not' in f
        ? 1 + depth(f.not)
        : 1;

const filterTemplate = tree(5).filter((f) => leaves(f) <= 50);

const scenario = fc.record({
  a: fc.array(contact, { minLength: CONTACTS, maxLength: CONTACTS }),
  imported: fc.array(importRow, { minLength: IMPORT_NEW + IMPORT_EXISTING, maxLength: IMPORT_NEW + IMPORT_EXISTING }),
  importExisting: fc.array(fc.nat(CONTACTS - 1), { minLength: IMPORT_EXISTING, maxLength: IMPORT_EXISTING }),
  ops: fc.array(operation, { minLength: OPS, maxLength: OPS }),
  b: fc.array(fc.record({ from: fc.nat(CONTACTS + IMPORT_NEW - 1), contact }), {
    minLength: B_CONTACTS,
    maxLength: B_CONTACTS,
  }),
  filters: fc.array(fc.tuple(fc.option(filterTemplate, { nil: undefined, freq: 8 }), fc.integer({ min: 1, max: 7 })), {
    minLength: FILTERS,
    maxLength: FILTERS,
  }),
});

interface Account {
  accountId: string;
  key: string;
  brandIds: string[];
  /** Every address written, by emailMd5 (some erased since): the oracle reads them all back. */
  written: Map<string, string>;
}

async function account(name: string): Promise<Account> {
  const sql = bed.t.db.sql;
  const accountId = await createAccount(sql, name);
  for (const [attribute, type] of Object.entries(SCHEMA)) await createAttribute(sql, accountId, attribute, type);
  const brandIds: string[] = [];
  // Names not in id order: stats list brands by name.
  for (let b = 0; b < BRANDS; b++) brandIds.push(await createBrand(sql, accountId, `brand ${(b * 7) % BRANDS}`));
  return { accountId, key: await createKey(sql, accountId), brandIds, written: new Map() };
}

async function create(acc: Account, email: string, body: Record<string, unknown>) {
  const res = await bed.t.call('POST', '/v1/contacts', { key: acc.key, body: { email, ...body } });
  expect([200, 201]).toContain(res.status);
  acc.written.set(res.body.emailMd5, email);
}

/** An API import into the account with `overwrite`: POST, PUT to the link, the pipeline; it must succeed. */
async function apiImport(acc: Account, csv: string) {
  const { t } = bed;
  const columns = ['Email', 'Tier', 'age', 'vip', 'Tags', 'work', 'Brand'];
  const created = await t.call('POST', '/v1/contact-imports', {
    key: acc.key,
    body: { columns, duplicateContactStrategy: 'overwrite' },
  });
  expect(created.status).toBe(201);
  expect((await bed.put(new Request(created.body.uploadUrl, { method: 'PUT', body: csv }))).status).toBe(200);
  await runImport({ sql: t.db.sql, storage: bed.storage, config: testConfig(2) }, acc.accountId, created.body.id);
  const got = await t.call('GET', `/v1/contact-imports/${created.body.id}`, { key: acc.key });
  expect(got.body).toMatchObject({ status: 'success', malformedCount: 0 });
}

/** The account's contacts as GET gives them, for every address ever written: the oracle's input. */
async function contactsOf(acc: Account): Promise<ApiContact[]> {
  const out: ApiContact[] = [];
  for (const emailMd5 of acc.written.keys()) {
    const res = await bed.t.call('GET', `/v1/contacts/${emailMd5}`, { key: acc.key });
    if (res.status === 404) continue;
    expect(res.status).toBe(200);
    out.push(res.body);
  }
  return out;
}

/** The template with its references made real for this account and these contacts. */
function resolve(template: unknown, acc: Account, times: readonly number[]): Filter {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string' && v.startsWith('@brand:')) return acc.brandIds[Number(v.slice(7))];
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') {
      if ('at' in v && 'deltaMs' in v) return timeText(v as TimeRef, times);
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    }
    return v;
  };
  return walk(template) as Filter;
}

/** A contact's creation time ± 1 ms, as RFC 3339 in one of three zones (the same instant). */
function timeText(ref: TimeRef, times: readonly number[]): string {
  const ms = (times.length ? times[ref.at % times.length]! : Date.now()) + ref.deltaMs;
  const offset = { Z: 0, '+02:00': 120, '-05:30': -330 }[ref.zone];
  const local = new Date(ms + offset * 60_000).toISOString().slice(0, -1);
  return `${local}${ref.zone}`;
}

let searched = 0;
let matched = 0;
let nonEmpty = 0;
let pages = 0;

/** Every page of the search joined through `next`. */
async function allPages(acc: Account, filter: Filter | undefined, pageSize: number): Promise<ApiContact[]> {
  const out: ApiContact[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const body = { ...(filter !== undefined && { filter }), pageSize, ...(cursor !== undefined && { cursor }) };
    const res = await bed.t.call('POST', '/v1/contact-searches', { key: acc.key, body });
    if (res.status !== 200)
      throw new Error(`search ${JSON.stringify(body)}: ${res.status} ${JSON.stringify(res.body)}`);
    pages++;
    expect(res.body.data.length).toBeLessThanOrEqual(pageSize);
    out.push(...res.body.data);
    if (res.body.next === null) return out;
    expect(typeof res.body.next).toBe('string');
    cursor = res.body.next;
  }
  throw new Error('a search of a few dozen contacts gave over 100 pages');
}

async function check(acc: Account, templates: readonly [unknown, number][]) {
  const contacts = await contactsOf(acc);
  const times = contacts.map((c) => Date.parse(c.createdAt));
  for (const [template, pageSize] of templates) {
    const filter = template === undefined ? undefined : resolve(template, acc, times);
    const expected = evaluate(SCHEMA, filter, contacts);
    const got = await allPages(acc, filter, pageSize);
    const what = `filter ${JSON.stringify(filter)}`;
    expect(
      got.map((c) => c.emailMd5),
      what,
    ).toEqual(expected.map((c) => c.emailMd5));
    expect(got, what).toEqual(expected);
    const count = await bed.t.call('POST', '/v1/contact-counts', {
      key: acc.key,
      body: filter === undefined ? {} : { filter },
    });
    expect(count.status, what).toBe(200);
    expect(count.body, what).toEqual({ count: expected.length });
    searched++;
    matched += expected.length;
    if (expected.length > 0 && expected.length < contacts.length) nonEmpty++;
  }
  // Stats: the live brands by name, as GET /v1/brands lists them.
  const live = acc.brandIds.filter((_, i) => i !== DELETED_BRAND);
  const names = new Map<string, string>();
  for (const id of live) names.set(id, (await bed.t.call('GET', `/v1/brands/${id}`, { key: acc.key })).body.name);
  live.sort((x, y) => (names.get(x)! < names.get(y)! ? -1 : 1));
  const stats = await bed.t.call('GET', '/v1/contact-stats', { key: acc.key });
  expect(stats.status).toBe(200);
  expect(stats.body).toEqual(statsOf(contacts, live));
}

test(
  `property: ${RUNS} runs of ${CONTACTS}+${IMPORT_NEW} contacts (A) and ${B_CONTACTS} (B), ` +
    `${FILTERS} filters each (seed ${SEED}): searches, counts and stats equal the oracle`,
  async () => {
    const { t } = bed;
    const sql = t.db.sql;
    const started = performance.now();
    let run = 0;
    let maxDepth = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        run++;
        const a = await account(`search A ${run}`);
        const b = await account(`search B ${run}`);
        const brandsOf = (acc: Account, set: readonly number[]) => set.map((i) => acc.brandIds[i]!);

        for (const [i, c] of s.a.entries())
          await create(a, address(i, c.domain, c.caps), { attributes: c.attributes, brandIds: brandsOf(a, c.brands) });

        // The import: IMPORT_NEW new addresses, then IMPORT_EXISTING of the created ones, overwritten.
        const names = new Map<string, string>();
        for (const id of a.brandIds) names.set(id, (await t.call('GET', `/v1/brands/${id}`, { key: a.key })).body.name);
        const lines = ['Email,Tier,age,vip,Tags,work,Brand'];
        for (const [j, row] of s.imported.entries()) {
          const email =
            j < IMPORT_NEW
              ? address(CONTACTS + j, row.domain, false)
              : a.written.get([...a.written.keys()][s.importExisting[j - IMPORT_NEW]!]!)!;
          const v = row.attributes;
          lines.push(
            csvLine([
              email,
              v.Tier ?? '',
              v.age === undefined ? '' : String(v.age),
              v.vip === undefined ? '' : String(v.vip),
              (v.Tags ?? []).join(';'),
              v.work ?? '',
              row.brands.map((x) => names.get(a.brandIds[x]!)!).join(';'),
            ]),
          );
          a.written.set(md5(email), email);
        }
        await apiImport(a, lines.join('\n') + '\n');

        // A brand deleted: contacts keep its id, a filter may name it, stats leave it out.
        for (const acc of [a, b])
          await sql`update brands set deleted_at = now() where account_id = ${acc.accountId}
            and id = ${acc.brandIds[DELETED_BRAND]!}`;

        const targets = [...a.written.keys()];
        for (const op of s.ops) {
          const md = targets[op.target % targets.length]!;
          const path = `/v1/contacts/${md}`;
          let res;
          switch (op.kind) {
            case 'patch':
              res = await t.call('PATCH', path, { key: a.key, body: { attributes: op.attributes } });
              break;
            case 'disable':
              res = await t.call('POST', `${path}/disable`, { key: a.key });
              break;
            case 'addBrands':
              res = await t.call('POST', `${path}/brands`, { key: a.key, body: { brandIds: brandsOf(a, op.brands) } });
              break;
            case 'removeBrand':
              res = await t.call('DELETE', `${path}/brands/${a.brandIds[op.brand]}`, { key: a.key });
              break;
            case 'erase':
              res = await t.call('DELETE', path, { key: a.key });
              break;
            case 'eraseMany': {
              const emailMd5s = [...new Set([md, targets[op.also % targets.length]!])];
              res = await t.call('POST', '/v1/contact-erasures', { key: a.key, body: { emailMd5s } });
              break;
            }
          }
          // An erased contact is gone (404); a brand it does not carry, or a deleted one, cannot be
          // removed (400).
          const refused = res.status === 404 || (op.kind === 'removeBrand' && res.status === 400);
          if (![200, 204].includes(res.status) && !refused)
            throw new Error(`${op.kind} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
        }

        // B: some of A's addresses, in B with B's own attributes and brands.
        for (const { from, contact: c } of s.b)
          await create(b, address(from, c.domain, !c.caps), {
            attributes: c.attributes,
            brandIds: brandsOf(
              b,
              c.brands.filter((x) => x !== DELETED_BRAND),
            ),
            // The same address twice: the second merges into the first.
            duplicateContactStrategy: 'overwrite',
          });

        for (const [f] of s.filters) if (f !== undefined) maxDepth = Math.max(maxDepth, depth(f));
        await check(a, s.filters);
        await check(b, s.filters);
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.log(
      `search property: ${RUNS} runs × (${CONTACTS} created + ${IMPORT_NEW} imported in A, ${B_CONTACTS} in B), ` +
        `seed ${SEED}: ${searched} searches (${pages} pages) and counts, ${nonEmpty} matched some but not all ` +
        `(${matched} contacts matched in all), deepest filter ${maxDepth} levels, ${seconds} s`,
    );
    expect(run).toBe(RUNS);
    // The filters must mean something: most of them match some contacts and not all.
    expect(nonEmpty).toBeGreaterThan(searched * 0.3);
    expect(maxDepth).toBe(5);
  },
  180_000,
);

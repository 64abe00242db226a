// The search step's own pieces, without a database: its filters match what the issue asks for on the
// generator's rows (a string eq held by about 1 %, a number range by about 10 %, one matching at most
// 100, one matching none), and the checks of a page and of the stats find every difference.
import { describe, expect, test } from 'bun:test';
import { BRANDS, type Value } from '../lib/dataset';
import { SHAPES, type ShapeName } from '../lib/shapes';
import { filtersOf, pageDiff, statsDiff, timing } from './search';

const ROWS = 40_000;
const brandIds = BRANDS.map((_, k) => `00000000-0000-4000-8000-00000000000${k}`);

/** A contact after import A and B of the generator's normal rows: B's attributes, A's and B's brands. */
interface Model {
  email: string;
  attributes: Record<string, Value>;
  brands: string[];
}

function contactsOf(shape: ShapeName): Model[] {
  const out: Model[] = [];
  for (let i = 0; i < ROWS; i++) {
    const a = SHAPES[shape].rowAt(i, 0);
    if (a.kind !== 'normal') continue;
    const b = SHAPES[shape].rowAt(i, 1);
    const brands = [...new Set([...a.brands, ...b.brands])].map((k) => brandIds[k]!);
    out.push({ email: a.email, attributes: b.attributes, brands });
  }
  return out;
}

const domainOf = (email: unknown) => (typeof email === 'string' ? email.toLowerCase().split('@').at(-1) : undefined);
const has = (list: unknown, v: string) => Array.isArray(list) && list.includes(v);

/** The filters by hand over the model, by name (the step's SQL is the run's check; this is the test's). */
const MODEL: Record<ShapeName, Record<string, (c: Model, few: Set<string>) => boolean>> = {
  wide: {
    brand: (c) => c.brands.includes(brandIds[3]!),
    disabled: () => false,
    'name-in-city': (c) => c.attributes.first_name === 'Ada' && c.attributes.city === 'Berlin',
    'age-range': (c) => (c.attributes.age as number) >= 30 && (c.attributes.age as number) < 37,
    vip: (c) => c.attributes.vip === true,
    tag: (c) => has(c.attributes.tags, 'Newsletter0'),
    'email-domain': (c) => domainOf(c.email) === 'mailbox7.benchmark-example.com',
    'alt-domain': (c) => domainOf(c.attributes.alt_email) === 'secondary3.benchmark-example.org',
    'and-or-not': (c) =>
      (c.brands.includes(brandIds[5]!) || c.attributes.city === 'Oslo') && c.attributes.opted_in !== true,
    'few-emails': (c, few) => few.has(c.email.toLowerCase()),
    none: (c) => c.attributes.city === 'Atlantis',
  },
  narrow: {
    'labels-any': (c) => has(c.attributes.labels, 'Vip') || has(c.attributes.labels, 'Sale'),
    disabled: () => false,
    'nick-at-domain': (c) =>
      c.attributes.nickname === 'Ada' && domainOf(c.attributes.backup_email) === 'bak3.example.org',
    'visits-range': (c) => (c.attributes.visits as number) >= 101 && (c.attributes.visits as number) < 201,
    inactive: (c) => c.attributes.active === false,
    label: (c) => has(c.attributes.labels, 'Promo'),
    'email-domain': (c) => domainOf(c.email) === 'mailbox7.example.net',
    'and-or-not': (c) =>
      (c.attributes.nickname === 'Grace' && c.attributes.active === true) || !((c.attributes.visits as number) < 951),
    'few-emails': (c, few) => few.has(c.email.toLowerCase()),
    none: (c) => c.attributes.nickname === 'Nobody',
  },
};

describe.each(['wide', 'narrow'] as const)('the %s shape', (shape) => {
  const few = SHAPES[shape].sampleNormalRows(ROWS, 50, 9).map((i) => SHAPES[shape].rowAt(i, 0).email);
  const specs = filtersOf(shape, { brandIds, emails: few });
  const contacts = contactsOf(shape);
  const share = (name: string) => {
    const fewSet = new Set(few.map((e) => e.toLowerCase()));
    return contacts.filter((c) => MODEL[shape][name]!(c, fewSet)).length / contacts.length;
  };

  test('has at least 10 filters, each with its SQL check, and the model names them all', () => {
    expect(specs.length).toBeGreaterThanOrEqual(10);
    expect(specs.map((s) => s.name).sort()).toEqual(Object.keys(MODEL[shape]).sort());
    for (const s of specs) {
      // Every $n of the check has its value ($1 is the account).
      const params = [...s.check.where.matchAll(/\$(\d+)/g)].map((m) => Number(m[1]));
      expect(Math.max(1, ...params)).toBe(s.check.values.length + 1);
    }
  });

  test('a string eq held by about 1 %, a number range by about 10 %', () => {
    const string = shape === 'wide' ? 'name-in-city' : 'nick-at-domain';
    const range = shape === 'wide' ? 'age-range' : 'visits-range';
    expect(share(string)).toBeGreaterThan(0.006);
    expect(share(string)).toBeLessThan(0.012);
    expect(share(range)).toBeGreaterThan(0.09);
    expect(share(range)).toBeLessThan(0.11);
  });

  test('one filter matches exactly the 50 addresses it names, one none, every other some but not all', () => {
    expect(few.length).toBe(50);
    expect(Math.round(share('few-emails') * contacts.length)).toBe(50);
    expect(share('none')).toBe(0);
    for (const s of specs.filter((x) => !['few-emails', 'none', 'disabled'].includes(x.name))) {
      expect(share(s.name)).toBeGreaterThan(0.005);
      expect(share(s.name)).toBeLessThan(0.9);
    }
  });
});

describe('the checks', () => {
  const page = (md5s: string[], next: string | null) => ({ data: md5s.map((emailMd5) => ({ emailMd5 })), next });

  test("a page equals the SQL's md5s in order, with next exactly when more match", () => {
    expect(pageDiff(page(['a', 'b'], 'x'), ['a', 'b'], true)).toBeUndefined();
    expect(pageDiff(page(['a', 'b'], null), ['a', 'b'], false)).toBeUndefined();
    expect(pageDiff(page(['a'], null), ['a', 'b'], false)).toContain('1 contacts, expected 2');
    expect(pageDiff(page(['b', 'a'], null), ['a', 'b'], false)).toContain('contact 1 is b');
    expect(pageDiff(page(['a', 'b'], null), ['a', 'b'], true)).toContain('next null');
    expect(pageDiff(page(['a', 'b'], 'x'), ['a', 'b'], false)).toContain('next given');
  });

  test('stats equal the recount: totals and every live brand, none more', () => {
    const want = { total: 10, enabled: 8, disabled: 2, brands: new Map([['b1', 3]]) };
    const got = { total: 10, enabled: 8, disabled: 2, brands: [{ brandId: 'b1', count: 3 }] };
    expect(statsDiff(got, want)).toBeUndefined();
    expect(statsDiff({ ...got, disabled: 1 }, want)).toContain('disabled 1');
    expect(statsDiff({ ...got, brands: [{ brandId: 'b1', count: 4 }] }, want)).toContain('brand b1: 4');
    expect(statsDiff({ ...got, brands: [{ brandId: 'b2', count: 3 }] }, want)).toContain('not a live brand');
    expect(statsDiff({ ...got, brands: [] }, want)).toContain('lists 0 brands');
  });

  test('p50 and p95 by nearest rank', () => {
    const ms = Array.from({ length: 50 }, (_, k) => 50 - k);
    const t = timing(ms);
    expect(t.p50).toBe(25);
    expect(t.p95).toBe(48);
    expect(t.ms).toHaveLength(50);
  });
});

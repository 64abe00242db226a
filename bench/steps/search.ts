/**
 * Step `search` (issue 56, item 6 "Speed"): finding contacts in the account import A and B left, for
 * each file shape (`--steps a,b,search`), right after its import B (the narrow shape's contacts are
 * dropped after that, shape-steps.ts).
 * 1. Setup: DISABLED contacts of the account disabled through POST /v1/contacts/{md5}/disable, so
 *    `enabled: false` and the stats' `disabled` meet some (an import disables none); enabled again
 *    through POST /v1/contacts `restoreDisabled` at the end, so the steps after see the imports' account.
 * 2. A fixed set of filters per shape (filtersOf: at least 10, the issue's list), each with its own
 *    set-based SQL check written here, apart from the API's compiler: plain SQL over the account's
 *    contacts. For each filter the step follows `next` LATER_PAGE pages in and keeps that page's
 *    cursor (the "later page").
 * 3. Alone, `runs` rounds (50; `--search-runs`), one request at a time: in each round every filter's
 *    first page (pageSize 100), its later page and its count (POST /v1/contact-counts), then GET
 *    /v1/contact-stats. Round after round rather than filter after filter: the machine's drift and
 *    the buffer cache fall on every filter alike. Each request is timed by the client (fetch to the
 *    body read), p50/p95 per filter and kind.
 * 4. Verified after timing, every answer: each count equals the SQL count, each first page's
 *    emailMd5s the first PAGE_SIZE of the SQL ordered by email_md5 (and its `next` present exactly
 *    when more match), each later page the SQL's rows at its offset; every stats answer the SQL
 *    recount (total, enabled, disabled, every live brand's contacts). A mismatch fails the run.
 * 5. Another account's GET /v1/contacts/{md5} (export.ts's load: 32 connections): idle `--duration`
 *    seconds, then while the step's requests run again (rounds of every filter's pages and count and
 *    the stats, for at least `--duration` seconds), then idle again; the GET p99 during it against the
 *    mean of the two idle spans (bracketP99), target ≤ 2 ×.
 * Targets: page p95 ≤ 50 ms (first and later, each filter); count p95 ≤ 1 s for a filter matching at
 * most 1M contacts, ≤ 5 s for every filter; stats p95 ≤ 10 ms; GET p99 ≤ 2 × idle.
 * What search costs the imports is no figure of this step: the import A and B rows of the same run
 * are set against a run of the commit before search (the closing note of issue 56).
 */
import type { Result } from 'autocannon';
import type { Sql, Tx } from '../../src/db';
import { withSearchTimeout } from '../../src/search/run';
import { countStatement, pageStatement } from '../../src/search/statements';
import { resolveFilter } from '../../src/search/service';
import { createBenchAccount, type BenchAccount } from '../lib/account';
import { contactPool } from '../lib/baseline';
import { md5Hex } from '../lib/dataset';
import { fix, fmtInt, table } from '../lib/format';
import { bracketP99, percentile, PhaseLoad, PhaseTimeline, type Figures } from '../lib/phase-latency';
import { SHAPES, type ShapeName } from '../lib/shapes';
import type { HttpTarget, PoolContact, Target } from '../lib/types';
import { VerificationError } from '../lib/verify';
import { load, preflight } from './http';

export const SEARCH_TARGETS = {
  /** ms, p95 of a first and of a later page, every filter */
  pageP95Ms: 50,
  /** ms, count p95 of a filter matching at most COUNT_SMALL contacts */
  countSmallP95Ms: 1000,
  /** ms, count p95 of any filter */
  countP95Ms: 5000,
  countSmall: 1_000_000,
  statsP95Ms: 10,
  p99XIdle: 2,
};
export const SEARCH_RUNS = 50;
const PAGE_SIZE = 100;
/** The later page: the page after LATER_PAGE pages followed through `next` (page 6). */
const LATER_PAGE = 5;
/** Contacts disabled for the step (then enabled again). */
const DISABLED = 1000;
/** How many at most match the "few" filter: an `Email` `in` of this many addresses of the file. */
const FEW = 50;
/** The other account's GET load, as the export step's. */
const CONNECTIONS = 32;
/** Fewer answers in a span and its p99 is shown, not judged (the export and mixed steps' rule). */
const MIN_REQUESTS = 1000;
/**
 * A filter's requests of a kind (first page, later page, count) that ran past SEARCH_TIMEOUT_MS (504)
 * this many times are not sent again in later rounds: at 25M rows 50 rounds of them would take hours.
 */
const MAX_TIMEOUTS = 3;
/** Requests of the setup (disable, enable) in flight at once. */
const SETUP_CONCURRENCY = 8;

export type Filter = Record<string, unknown>;

/** A set-based check of a filter: a predicate over `contacts c`, `$1` the account, `$2…` its values. */
export interface SqlCheck {
  where: string;
  values: (string | number | boolean)[];
}

export interface SearchFilterSpec {
  name: string;
  /** what it asks, for the table */
  about: string;
  filter: Filter;
  check: SqlCheck;
}

/** The shape's data as the step needs it: the brand ids and FEW addresses of the file (as written). */
export interface FilterData {
  brandIds: readonly string[];
  /** FEW addresses of good rows of file A, as the file writes them */
  emails: readonly string[];
}

// The SQL checks' pieces: jsonb read by hand, not through anything of src/search.
const attr = (name: string) => `c.attributes -> '${name}'`;
const isString = (name: string, param: number) =>
  `(jsonb_typeof(${attr(name)}) = 'string' and c.attributes ->> '${name}' = $${param})`;
const num = (name: string) => `(case when jsonb_typeof(${attr(name)}) = 'number' then (${attr(name)})::numeric end)`;
const isTrue = (name: string) => `coalesce(${attr(name)} = 'true'::jsonb, false)`;
/** An array attribute with an entry where `entry` (over `e`) holds; CASE: `and` may run either side first. */
const listWhere = (name: string, entry: string) =>
  `(case when jsonb_typeof(${attr(name)}) = 'array' then exists ` +
  `(select 1 from jsonb_array_elements_text(${attr(name)}) e where ${entry}) else false end)`;
const listHas = (name: string, param: number) => listWhere(name, `e = $${param}`);
const emailDomain = (column: string) => `lower(substring(${column} from '@([^@]*)$'))`;
/** `expr` one of a JSON array's strings, sent as text (a jsonb parameter would be sent JSON-encoded again). */
const inJson = (expr: string, param: number) => `${expr} in (select jsonb_array_elements_text($${param}::text::jsonb))`;

/**
 * The filters of a shape, as a user would send them, over the values the generator gives after
 * import B (dataset.ts and narrow.ts, variant 1: every attribute sent, brands A's and B's together).
 * The shares are the generator's (search.test.ts measures them on its rows).
 */
export function filtersOf(shape: ShapeName, data: FilterData): SearchFilterSpec[] {
  const few = data.emails.slice(0, FEW);
  const fewLower = JSON.stringify(few.map((e) => e.trim().toLowerCase()));
  const disabled: SearchFilterSpec = {
    name: 'disabled',
    about: `enabled false (${DISABLED} disabled by the step)`,
    filter: { enabled: false },
    check: { where: 'not c.enabled', values: [] },
  };
  const fewEmails: SearchFilterSpec = {
    name: 'few-emails',
    about: `Email in ${few.length} addresses of the file`,
    filter: { attribute: 'Email', op: 'in', value: few },
    check: { where: inJson('lower(c.email)', 2), values: [fewLower] },
  };
  if (shape === 'wide') {
    const brand = data.brandIds[3]!;
    const brand5 = data.brandIds[5]!;
    return [
      {
        name: 'brand',
        about: 'Brand contains Brand 3',
        filter: { attribute: 'Brand', op: 'contains', value: brand },
        check: { where: '$2::uuid = any(c.brand_ids)', values: [brand] },
      },
      disabled,
      {
        name: 'name-in-city',
        about: 'first_name eq Ada and city eq Berlin (1/128)',
        filter: {
          and: [
            { attribute: 'first_name', op: 'eq', value: 'Ada' },
            { attribute: 'city', op: 'eq', value: 'Berlin' },
          ],
        },
        check: { where: `${isString('first_name', 2)} and ${isString('city', 3)}`, values: ['Ada', 'Berlin'] },
      },
      {
        name: 'age-range',
        about: 'age gte 30 and lt 37 (7 of 70 ages)',
        filter: {
          and: [
            { attribute: 'age', op: 'gte', value: 30 },
            { attribute: 'age', op: 'lt', value: 37 },
          ],
        },
        check: { where: `${num('age')} >= $2 and ${num('age')} < $3`, values: [30, 37] },
      },
      {
        name: 'vip',
        about: 'vip eq true',
        filter: { attribute: 'vip', op: 'eq', value: true },
        check: { where: isTrue('vip'), values: [] },
      },
      {
        name: 'tag',
        about: 'tags contains Newsletter0',
        filter: { attribute: 'tags', op: 'contains', value: 'Newsletter0' },
        check: { where: listHas('tags', 2), values: ['Newsletter0'] },
      },
      {
        name: 'email-domain',
        about: 'Email domain mailbox7.benchmark-example.com (1/50)',
        filter: { attribute: 'Email', op: 'domain', value: 'mailbox7.benchmark-example.com' },
        check: { where: `${emailDomain('c.email')} = $2`, values: ['mailbox7.benchmark-example.com'] },
      },
      {
        name: 'alt-domain',
        about: 'alt_email:domain eq secondary3.benchmark-example.org (1/13)',
        filter: { attribute: 'alt_email:domain', op: 'eq', value: 'secondary3.benchmark-example.org' },
        check: {
          where:
            `jsonb_typeof(${attr('alt_email')}) = 'string' and ` +
            `${emailDomain(`(c.attributes ->> 'alt_email')`)} = $2`,
          values: ['secondary3.benchmark-example.org'],
        },
      },
      {
        name: 'and-or-not',
        about: '(Brand contains Brand 5 or city eq Oslo) and not opted_in eq true',
        filter: {
          and: [
            {
              or: [
                { attribute: 'Brand', op: 'contains', value: brand5 },
                { attribute: 'city', op: 'eq', value: 'Oslo' },
              ],
            },
            { not: { attribute: 'opted_in', op: 'eq', value: true } },
          ],
        },
        check: {
          where: `($2::uuid = any(c.brand_ids) or ${isString('city', 3)}) and not ${isTrue('opted_in')}`,
          values: [brand5, 'Oslo'],
        },
      },
      fewEmails,
      {
        name: 'none',
        about: 'city eq Atlantis (no contact)',
        filter: { attribute: 'city', op: 'eq', value: 'Atlantis' },
        check: { where: isString('city', 2), values: ['Atlantis'] },
      },
    ];
  }
  return [
    {
      name: 'labels-any',
      about: 'labels containsAny Vip, Sale (in place of a brand)',
      filter: { attribute: 'labels', op: 'containsAny', value: ['Vip', 'Sale'] },
      check: {
        where: listWhere('labels', inJson('e', 2)),
        values: [JSON.stringify(['Vip', 'Sale'])],
      },
    },
    disabled,
    {
      name: 'nick-at-domain',
      about: 'nickname eq Ada and backup_email:domain eq bak3.example.org (1/112)',
      filter: {
        and: [
          { attribute: 'nickname', op: 'eq', value: 'Ada' },
          { attribute: 'backup_email:domain', op: 'eq', value: 'bak3.example.org' },
        ],
      },
      check: {
        where:
          `${isString('nickname', 2)} and jsonb_typeof(${attr('backup_email')}) = 'string' and ` +
          `${emailDomain(`(c.attributes ->> 'backup_email')`)} = $3`,
        values: ['Ada', 'bak3.example.org'],
      },
    },
    {
      name: 'visits-range',
      about: 'visits gte 101 and lt 201 (1 in 10)',
      filter: {
        and: [
          { attribute: 'visits', op: 'gte', value: 101 },
          { attribute: 'visits', op: 'lt', value: 201 },
        ],
      },
      check: { where: `${num('visits')} >= $2 and ${num('visits')} < $3`, values: [101, 201] },
    },
    {
      name: 'inactive',
      about: 'active eq false',
      filter: { attribute: 'active', op: 'eq', value: false },
      check: { where: `coalesce(${attr('active')} = 'false'::jsonb, false)`, values: [] },
    },
    {
      name: 'label',
      about: 'labels contains Promo',
      filter: { attribute: 'labels', op: 'contains', value: 'Promo' },
      check: { where: listHas('labels', 2), values: ['Promo'] },
    },
    {
      name: 'email-domain',
      about: 'Email domain mailbox7.example.net (1/20, some written Mailbox7.example.net)',
      filter: { attribute: 'Email', op: 'domain', value: 'mailbox7.example.net' },
      check: { where: `${emailDomain('c.email')} = $2`, values: ['mailbox7.example.net'] },
    },
    {
      name: 'and-or-not',
      about: '(nickname eq Grace and active eq true) or not visits lt 951',
      filter: {
        or: [
          {
            and: [
              { attribute: 'nickname', op: 'eq', value: 'Grace' },
              { attribute: 'active', op: 'eq', value: true },
            ],
          },
          { not: { attribute: 'visits', op: 'lt', value: 951 } },
        ],
      },
      check: {
        where: `(${isString('nickname', 2)} and ${isTrue('active')}) or not coalesce(${num('visits')} < $3, false)`,
        values: ['Grace', 951],
      },
    },
    fewEmails,
    {
      name: 'none',
      about: 'nickname eq Nobody (no contact)',
      filter: { attribute: 'nickname', op: 'eq', value: 'Nobody' },
      check: { where: isString('nickname', 2), values: ['Nobody'] },
    },
  ];
}

/** Nearest-rank percentiles of a run's milliseconds, and the milliseconds themselves (0.01 ms). */
export interface Timing {
  p50: number;
  p95: number;
  ms: number[];
}

export function timing(ms: readonly number[]): Timing {
  const sorted = Float64Array.from(ms).sort();
  return {
    p50: percentile(sorted, 50) ?? NaN,
    p95: percentile(sorted, 95) ?? NaN,
    ms: ms.map((m) => Math.round(m * 100) / 100),
  };
}

export interface FilterRun {
  name: string;
  about: string;
  filter: Filter;
  /** the SQL check's count, which every count answer equalled */
  matches: number;
  first: Timing;
  /** the page after LATER_PAGE pages, when the filter has that many; else none */
  later?: Timing & { page: number };
  count: Timing;
  /** the count's p95 target (ms): by `matches` */
  countTargetMs: number;
  /** answers of each kind that were 504 (SEARCH_TIMEOUT_MS ran out): timed, not verified, a MISS */
  timeouts: { first: number; later: number; count: number };
  /**
   * Where a target was missed: EXPLAIN (ANALYZE, BUFFERS) of the API's statement (the first page's,
   * the count's), compiled by src/search as the API compiles it, run once after the timed rounds.
   */
  plans?: { page?: string; count?: string };
}

export interface LoadSpan extends Figures {
  name: string;
  seconds: number;
}

export interface SearchRun {
  shape: ShapeName;
  accountId: string;
  contacts: number;
  disabled: number;
  runs: number;
  pageSize: number;
  laterPage: number;
  filters: FilterRun[];
  stats: Timing;
  /** seconds of the timed rounds alone, and of the verification after them */
  seconds: number;
  verifySeconds: number;
  /** another account's GETs: idle, during the step's requests (rounds), idle after */
  load: { idle: LoadSpan; during: LoadSpan & { rounds: number }; idleAfter: LoadSpan; reference: number };
  connections: number;
  minRequests: number;
}

interface Ctx {
  baseUrl: string;
  sql: Sql;
}

export interface SearchOptions {
  /** rows of the shape's file A (where the disabled and the FEW addresses are drawn from) */
  rows: number;
  runs: number;
  /** seconds of each idle span and at least of the loaded one */
  seconds: number;
  warmupSeconds: number;
}

interface SearchPageBody {
  data: { emailMd5: string }[];
  next: string | null;
}
interface StatsBody {
  total: number;
  enabled: number;
  disabled: number;
  brands: { brandId: string; count: number }[];
}

/** One request of the step, timed from the fetch to its body read; anything but a 200 fails the run. */
async function call<T>(ctx: Ctx, account: BenchAccount, method: string, path: string, body?: unknown) {
  const t0 = performance.now();
  const res = await fetch(`${ctx.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const ms = performance.now() - t0;
  if (res.status !== 200) throw new Error(`search: ${method} ${path} answered ${res.status}: ${text.slice(0, 500)}`);
  return { ms, body: JSON.parse(text) as T };
}

/**
 * A search or count, timed like `call`; a 504 (the statement ran past SEARCH_TIMEOUT_MS and was
 * cancelled) gives no body: the step counts it against its target instead of failing the run.
 */
async function timed<T>(ctx: Ctx, account: BenchAccount, path: string, body: unknown) {
  const t0 = performance.now();
  const res = await fetch(`${ctx.baseUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  const ms = performance.now() - t0;
  if (res.status === 504) return { ms, body: undefined };
  if (res.status !== 200) throw new Error(`search: POST ${path} answered ${res.status}: ${text.slice(0, 500)}`);
  return { ms, body: JSON.parse(text) as T };
}

const searchBody = (f: Filter, cursor?: string) => ({ filter: f, pageSize: PAGE_SIZE, ...(cursor && { cursor }) });

/** Runs `fn` over `items`, `n` at a time. */
async function pool<T>(items: readonly T[], n: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

export async function runSearchStep(
  ctx: Ctx,
  runId: string,
  shapeName: ShapeName,
  account: BenchAccount,
  opts: SearchOptions,
  log: (m: string) => void,
): Promise<SearchRun> {
  const shape = SHAPES[shapeName];
  const tag = `[search${shape.suffix}]`;
  const [{ n: contacts } = { n: 0 }] = await ctx.sql<{ n: number }[]>`
    select count(*)::int as n from contacts where account_id = ${account.id}`;
  if (contacts === 0) throw new Error('search: the account has no contacts (the step needs imports A and B before it)');
  const emailOf = (i: number) => shape.rowAt(i, 0).email;
  const disabledRows = shape.sampleNormalRows(opts.rows, Math.min(DISABLED, Math.floor(contacts / 10)), 7);
  const fewRows = shape.sampleNormalRows(opts.rows, FEW, 9);
  const specs = filtersOf(shapeName, { brandIds: account.brandIds, emails: fewRows.map(emailOf) });

  log(`${tag} disabling ${disabledRows.length} contacts through POST /v1/contacts/{md5}/disable`);
  await pool(disabledRows, SETUP_CONCURRENCY, async (i) => {
    await call(ctx, account, 'POST', `/v1/contacts/${md5Hex(emailOf(i))}/disable`);
  });
  try {
    return await measure();
  } finally {
    log(`${tag} enabling the ${disabledRows.length} contacts again (POST /v1/contacts, restoreDisabled)`);
    await pool(disabledRows, SETUP_CONCURRENCY, async (i) => {
      await call(ctx, account, 'POST', '/v1/contacts', {
        email: emailOf(i),
        duplicateContactStrategy: 'keep',
        restoreDisabled: true,
      });
    });
  }

  async function measure(): Promise<SearchRun> {
    // Each filter's later page: LATER_PAGE pages followed through `next`, the cursor of the page after.
    // A page that times out there is tried again (MAX_TIMEOUTS in all); then the filter has no later page.
    const later = new Map<string, { cursor: string; page: number }>();
    const unreached = new Set<string>();
    for (const s of specs) {
      let cursor: string | undefined;
      let page = 0;
      let timeouts = 0;
      while (page < LATER_PAGE && timeouts < MAX_TIMEOUTS) {
        const { body } = await timed<SearchPageBody>(
          ctx,
          account,
          '/v1/contact-searches',
          searchBody(s.filter, cursor),
        );
        if (!body) {
          timeouts++;
          continue;
        }
        page++;
        if (!body.next) break;
        cursor = body.next;
      }
      if (timeouts >= MAX_TIMEOUTS) {
        unreached.add(s.name);
        log(`${tag} ${s.name}: page ${page + 1} timed out ${timeouts} times; no later page timed`);
      } else if (page === LATER_PAGE && cursor) later.set(s.name, { cursor, page: LATER_PAGE + 1 });
    }

    // The timed rounds, alone: every answer kept for the verification after.
    // An answer `undefined`: a 504.
    const answers = specs.map(() => ({
      first: [] as (SearchPageBody | undefined)[],
      later: [] as (SearchPageBody | undefined)[],
      count: [] as (number | undefined)[],
      ms: { first: [] as number[], later: [] as number[], count: [] as number[] },
    }));
    const timeoutsOf = (list: readonly unknown[]) => list.filter((x) => x === undefined).length;
    const stats: StatsBody[] = [];
    const statsMs: number[] = [];
    const round = async (keep: boolean) => {
      for (const [k, s] of specs.entries()) {
        const a = answers[k]!;
        const due = (list: readonly unknown[]) => timeoutsOf(list) < MAX_TIMEOUTS;
        const l = later.get(s.name);
        const first = due(a.first)
          ? await timed<SearchPageBody>(ctx, account, '/v1/contact-searches', searchBody(s.filter))
          : undefined;
        const next =
          l && due(a.later)
            ? await timed<SearchPageBody>(ctx, account, '/v1/contact-searches', searchBody(s.filter, l.cursor))
            : undefined;
        const count = due(a.count)
          ? await timed<{ count: number }>(ctx, account, '/v1/contact-counts', { filter: s.filter })
          : undefined;
        if (!keep) continue;
        if (first) {
          a.first.push(first.body);
          a.ms.first.push(first.ms);
        }
        if (next) {
          a.later.push(next.body);
          a.ms.later.push(next.ms);
        }
        if (count) {
          a.count.push(count.body?.count);
          a.ms.count.push(count.ms);
        }
      }
      const st = await call<StatsBody>(ctx, account, 'GET', '/v1/contact-stats');
      if (keep) {
        stats.push(st.body);
        statsMs.push(st.ms);
      }
    };
    log(`${tag} ${specs.length} filters, ${opts.runs} rounds of first page, page ${LATER_PAGE + 1}, count; stats`);
    const t0 = performance.now();
    for (let r = 0; r < opts.runs; r++) {
      await round(true);
      if ((r + 1) % 10 === 0)
        log(`${tag} round ${r + 1}/${opts.runs}: ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    }
    const seconds = (performance.now() - t0) / 1000;

    // Verified after timing: every answer against the step's own SQL.
    const v0 = performance.now();
    const filters: FilterRun[] = [];
    for (const [k, s] of specs.entries()) {
      const a = answers[k]!;
      const fail = (what: string) => new VerificationError(`search${shape.suffix} ${s.name}: ${what}`);
      const matches = await sqlCount(ctx.sql, account.id, s.check);
      const bad = a.count.find((n) => n !== undefined && n !== matches);
      if (bad !== undefined) throw fail(`POST /v1/contact-counts answered ${bad}, the SQL check counts ${matches}`);
      const want = await sqlPage(ctx.sql, account.id, s.check, 0);
      for (const page of a.first) {
        if (!page) continue; // a 504
        const diff = pageDiff(page, want, matches > PAGE_SIZE);
        if (diff) throw fail(`the first page differs from the SQL check's first ${PAGE_SIZE}: ${diff}`);
      }
      const l = later.get(s.name);
      if (l) {
        const offset = (l.page - 1) * PAGE_SIZE;
        const wantLater = await sqlPage(ctx.sql, account.id, s.check, offset);
        for (const page of a.later) {
          if (!page) continue;
          const diff = pageDiff(page, wantLater, matches > offset + PAGE_SIZE);
          if (diff) throw fail(`page ${l.page} differs from the SQL check's rows at offset ${offset}: ${diff}`);
        }
      } else if (matches > LATER_PAGE * PAGE_SIZE && !unreached.has(s.name))
        throw fail(`${matches} match, but \`next\` ended before page ${LATER_PAGE + 1}`);
      const countTargetMs =
        matches <= SEARCH_TARGETS.countSmall ? SEARCH_TARGETS.countSmallP95Ms : SEARCH_TARGETS.countP95Ms;
      filters.push({
        name: s.name,
        about: s.about,
        filter: s.filter,
        matches,
        first: timing(a.ms.first),
        ...(l && { later: { ...timing(a.ms.later), page: l.page } }),
        count: timing(a.ms.count),
        countTargetMs,
        timeouts: { first: timeoutsOf(a.first), later: timeoutsOf(a.later), count: timeoutsOf(a.count) },
      });
    }
    const recount = await sqlStats(ctx.sql, account.id);
    for (const st of stats) {
      const diff = statsDiff(st, recount);
      if (diff) throw new VerificationError(`search${shape.suffix}: GET /v1/contact-stats ${diff}`);
    }
    if (recount.disabled !== disabledRows.length)
      throw new VerificationError(
        `search${shape.suffix}: ${recount.disabled} contacts disabled, the step disabled ${disabledRows.length}`,
      );
    const verifySeconds = (performance.now() - v0) / 1000;
    log(`${tag} every answer verified in ${verifySeconds.toFixed(1)} s`);
    for (const f of filters) {
      const page = Math.max(f.first.p95, f.later?.p95 ?? 0) > SEARCH_TARGETS.pageP95Ms;
      const count = f.count.p95 > f.countTargetMs;
      if (!page && !count) continue;
      f.plans = {
        ...(page && { page: await explain(ctx.sql, account.id, f.filter, 'page') }),
        ...(count && { count: await explain(ctx.sql, account.id, f.filter, 'count') }),
      };
      for (const [kind, plan] of Object.entries(f.plans))
        log(`${tag} ${f.name}: the ${kind} statement missed its target; its plan:\n${plan}`);
    }

    // Another account's GETs: idle, during rounds of the same requests, idle again.
    const other = await createBenchAccount(ctx.sql, `${runId} search load${shape.suffix}`);
    const otherPool = await contactPool(ctx.sql, other, 0);
    const target: HttpTarget = {
      name: 'api',
      baseUrl: ctx.baseUrl,
      headers: { authorization: `Bearer ${other.key}` },
    };
    await preflight(target, 'GET', otherPool, `search-${runId}`);
    if (opts.warmupSeconds > 0)
      await loadDuring(target, otherPool, 'warmup', () => Bun.sleep(opts.warmupSeconds * 1000));
    log(`${tag} another account's GETs, ${CONNECTIONS} connections: idle ${opts.seconds} s, the step's requests, idle`);
    const idle = await loadDuring(target, otherPool, 'idle', () => Bun.sleep(opts.seconds * 1000));
    let rounds = 0;
    const during = await loadDuring(target, otherPool, 'search', async () => {
      const d0 = performance.now();
      do {
        await round(false);
        rounds++;
      } while (performance.now() - d0 < opts.seconds * 1000);
    });
    const idleAfter = await loadDuring(target, otherPool, 'idle after', () => Bun.sleep(opts.seconds * 1000));
    await dropLoadContacts(ctx.sql, other.id);
    const run: SearchRun = {
      shape: shapeName,
      accountId: account.id,
      contacts,
      disabled: disabledRows.length,
      runs: opts.runs,
      pageSize: PAGE_SIZE,
      laterPage: LATER_PAGE + 1,
      filters,
      stats: timing(statsMs),
      seconds,
      verifySeconds,
      load: { idle, during: { ...during, rounds }, idleAfter, reference: bracketP99(idle, idleAfter) },
      connections: CONNECTIONS,
      minRequests: MIN_REQUESTS,
    };
    return run;
  }
}

/**
 * The load account's contacts gone again, by a plain DELETE of its 1,000 rows (its tallies with them,
 * as bench/lib/account.ts drops an account's contacts): the narrow shape's contacts are dropped after
 * this step, and with no other account's rows in the table that is a TRUNCATE, as without the step,
 * not a delete and vacuum of the whole table before the wide imports.
 */
async function dropLoadContacts(sql: Sql, accountId: string): Promise<void> {
  await sql.begin(async (tx) => {
    await tx.unsafe('set local contact_tallies.explicit to on');
    await tx`delete from contacts where account_id = ${accountId}`;
    await tx`delete from contact_tallies where account_id = ${accountId}`;
  });
}

/**
 * EXPLAIN (ANALYZE, BUFFERS) of the API's statement for a filter: its first page (pageSize 100, so a
 * limit of 101) or its count, the filter compiled by src/search as the API does and run as it runs
 * (withSearchTimeout: its transaction and settings), the statement as src/search/statements.ts writes it.
 */
async function explain(sql: Sql, accountId: string, filter: Filter, kind: 'page' | 'count'): Promise<string> {
  const { node } = await resolveFilter(sql, accountId, filter);
  const { text, args } =
    kind === 'page' ? pageStatement(accountId, node, undefined, PAGE_SIZE + 1) : countStatement(accountId, node);
  const rows = await withSearchTimeout(sql, 600_000, kind, (tx: Tx) =>
    tx.unsafe<{ 'QUERY PLAN': string }[]>(`explain (analyze, buffers) ${text}`, args as never[]),
  );
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}

async function sqlCount(sql: Sql, accountId: string, check: SqlCheck): Promise<number> {
  const [r] = await sql.unsafe<{ n: number }[]>(
    `select count(*)::int as n from contacts c where c.account_id = $1::uuid and (${check.where})`,
    [accountId, ...check.values] as never[],
  );
  return r!.n;
}

/** The emailMd5s of the matching contacts at `offset`, PAGE_SIZE of them, by email_md5. */
async function sqlPage(sql: Sql, accountId: string, check: SqlCheck, offset: number): Promise<string[]> {
  const rows = await sql.unsafe<{ md5: string }[]>(
    `select replace(c.email_md5::text, '-', '') as md5 from contacts c
     where c.account_id = $1::uuid and (${check.where})
     order by c.email_md5 offset ${offset} limit ${PAGE_SIZE}`,
    [accountId, ...check.values] as never[],
  );
  return rows.map((r) => r.md5);
}

/** Where a page differs from the SQL's md5s and from whether more match; undefined when equal. */
export function pageDiff(page: SearchPageBody, want: readonly string[], more: boolean): string | undefined {
  const got = page.data.map((c) => c.emailMd5);
  if (got.length !== want.length) return `${got.length} contacts, expected ${want.length}`;
  const at = got.findIndex((m, k) => m !== want[k]);
  if (at >= 0) return `contact ${at + 1} is ${got[at]}, expected ${want[at]}`;
  if ((page.next !== null) !== more)
    return `next ${page.next === null ? 'null' : 'given'}, expected ${more ? 'one' : 'null'}`;
  return undefined;
}

interface Recount {
  total: number;
  enabled: number;
  disabled: number;
  /** every live brand of the account (deleted_at null) and its contacts */
  brands: Map<string, number>;
}

async function sqlStats(sql: Sql, accountId: string): Promise<Recount> {
  const [t] = await sql<{ total: number; enabled: number }[]>`
    select count(*)::int as total, (count(*) filter (where enabled))::int as enabled
    from contacts where account_id = ${accountId}`;
  const carried = await sql<{ brand_id: string; n: number }[]>`
    select b as brand_id, count(*)::int as n from contacts c cross join lateral unnest(c.brand_ids) b
    where c.account_id = ${accountId} group by b`;
  const live = await sql<
    { id: string }[]
  >`select id from brands where account_id = ${accountId} and deleted_at is null`;
  const byId = new Map(carried.map((r) => [r.brand_id, r.n]));
  return {
    total: t!.total,
    enabled: t!.enabled,
    disabled: t!.total - t!.enabled,
    brands: new Map(live.map((b) => [b.id, byId.get(b.id) ?? 0])),
  };
}

/** Where a stats answer differs from the recount; undefined when equal. */
export function statsDiff(got: StatsBody, want: Recount): string | undefined {
  for (const key of ['total', 'enabled', 'disabled'] as const)
    if (got[key] !== want[key]) return `${key} ${got[key]}, the SQL recount ${want[key]}`;
  if (got.brands.length !== want.brands.size)
    return `lists ${got.brands.length} brands, the account has ${want.brands.size}`;
  for (const b of got.brands) {
    const n = want.brands.get(b.brandId);
    if (n === undefined) return `lists brand ${b.brandId}, not a live brand of the account`;
    if (b.count !== n) return `brand ${b.brandId}: ${b.count}, the SQL recount ${n}`;
  }
  return undefined;
}

/**
 * Another account's GETs from just before `work` starts until it ends, each answer in the span its
 * request was sent in (phase-latency.ts, as the export step's load). Checked: no error, no non-2xx.
 */
async function loadDuring(
  target: HttpTarget,
  pool: readonly PoolContact[],
  name: string,
  work: () => Promise<void>,
): Promise<LoadSpan> {
  const timeline = new PhaseTimeline('before', performance.now());
  const phases = new PhaseLoad(timeline);
  const instance = load(target, 'GET', pool, `search-${name}`, CONNECTIONS, 24 * 3600);
  instance.on('response', (_c, status, _b, ms) => phases.response(performance.now(), ms, status));
  instance.on('reqError', () => phases.error(performance.now()));
  await Bun.sleep(500); // the connections open and settle first
  timeline.mark(name, performance.now());
  try {
    await work();
  } finally {
    timeline.mark('after', performance.now());
    instance.stop();
  }
  const seconds = timeline.seconds().get(name)!;
  const r: Result = await instance;
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0)
    throw new VerificationError(
      `search load ${name}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts (${phases.faults()})`,
    );
  return { name, seconds, ...phases.figures([name], seconds) };
}

/** The step's table for one shape. */
export function searchTable(run: SearchRun): string {
  const label = SHAPES[run.shape].label('search');
  const head =
    `${label}: ${fmtInt(run.contacts)} contacts (${fmtInt(run.disabled)} disabled by the step), ${run.runs} rounds ` +
    `of each filter's first page, page ${run.laterPage} and count, one request at a time, pageSize ` +
    `${run.pageSize}; ${fix(run.seconds, 1)} s; every answer verified against the step's SQL ` +
    `(${fix(run.verifySeconds, 1)} s)`;
  const ms = (n: number) => fix(n, n < 100 ? 1 : 0);
  const rows = run.filters.map((f) => [
    f.name,
    fmtInt(f.matches),
    ms(f.first.p50),
    ms(f.first.p95),
    f.later ? ms(f.later.p50) : '-',
    f.later ? ms(f.later.p95) : '-',
    ms(f.count.p50),
    ms(f.count.p95),
    `<= ${SEARCH_TARGETS.pageP95Ms} / ${f.countTargetMs}`,
    f.timeouts.first + f.timeouts.later + f.timeouts.count
      ? `${f.timeouts.first} / ${f.timeouts.later} / ${f.timeouts.count}`
      : '-',
  ]);
  rows.push([
    'stats',
    '-',
    '-',
    '-',
    '-',
    '-',
    ms(run.stats.p50),
    ms(run.stats.p95),
    `<= ${SEARCH_TARGETS.statsP95Ms}`,
    '-',
  ]);
  const timings = table(
    [
      'filter',
      'matches',
      'page p50',
      'page p95',
      `page ${run.laterPage} p50`,
      `page ${run.laterPage} p95`,
      'count p50',
      'count p95',
      'target ms (page / count)',
      '504s (page / later / count)',
    ],
    rows,
  );
  const about = run.filters.map((f) => `  ${f.name}: ${f.about}`).join('\n');
  const { idle, during, idleAfter, reference } = run.load;
  const spans = table(
    ['span', 'seconds', 'answers', 'req/s', 'p50 ms', 'p99 ms', 'x idle p99', 'target'],
    [idle, during, idleAfter].map((s) => [
      s === during ? `${s.name} (${during.rounds} rounds)` : s.name,
      fix(s.seconds, 1),
      fmtInt(s.requests),
      fmtInt(s.reqPerSec),
      fix(s.p50, 1),
      fix(s.p99, 1),
      s === during ? fix((s.p99 ?? NaN) / reference, 2) : '-',
      s === during ? (s.requests < run.minRequests ? 'too few' : `<= ${SEARCH_TARGETS.p99XIdle}`) : '-',
    ]),
  );
  return (
    `${head}\n${timings}\n${about}\n\nanother account's GET /v1/contacts/{md5}, ${run.connections} connections, ` +
    `against the mean p99 of the idle spans around it (${fix(reference, 1)} ms)\n${spans}`
  );
}

export function searchTargets(run: SearchRun): Target[] {
  const label = SHAPES[run.shape].label('search');
  const page = SEARCH_TARGETS.pageP95Ms;
  const out: Target[] = [];
  const timedOut = (n: number) => (n ? `, ${n} timed out (504)` : '');
  for (const f of run.filters) {
    const worst = Math.max(f.first.p95, f.later?.p95 ?? 0);
    const pageTimeouts = f.timeouts.first + f.timeouts.later;
    out.push({
      name:
        `${label} ${f.name} (${fmtInt(f.matches)} match): page p95, ` +
        `first${f.later ? ` / page ${f.later.page}` : ''}`,
      value: `${fix(f.first.p95, 1)}${f.later ? ` / ${fix(f.later.p95, 1)}` : ''} ms${timedOut(pageTimeouts)}`,
      target: `<= ${page} ms`,
      pass: worst <= page && pageTimeouts === 0,
    });
    out.push({
      name: `${label} ${f.name} (${fmtInt(f.matches)} match): count p95`,
      value: `${fix(f.count.p95, 1)} ms${timedOut(f.timeouts.count)}`,
      target: `<= ${f.countTargetMs} ms`,
      pass: f.count.p95 <= f.countTargetMs && f.timeouts.count === 0,
    });
  }
  out.push({
    name: `${label}: GET /v1/contact-stats p95`,
    value: `${fix(run.stats.p95, 1)} ms`,
    target: `<= ${SEARCH_TARGETS.statsP95Ms} ms`,
    pass: run.stats.p95 <= SEARCH_TARGETS.statsP95Ms,
  });
  const { during, reference } = run.load;
  const ratio = (during.p99 ?? NaN) / reference;
  const judged = during.requests >= run.minRequests;
  out.push({
    name:
      `${label}: another account's GET p99 during the step over idle, the mean of the idle spans around it ` +
      `(${fix(during.p99, 1)} / ${fix(reference, 1)} ms)`,
    value: `${fix(ratio, 2)} x`,
    target: `<= ${SEARCH_TARGETS.p99XIdle} x`,
    pass: !judged || ratio <= SEARCH_TARGETS.p99XIdle,
    ...(!judged && { judged: false }),
  });
  return out;
}

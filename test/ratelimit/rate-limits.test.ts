/**
 * Rate limits per account (issue 38; docs/rate-limits.md): two real API processes on one
 * PostgreSQL and one Redis (a fault bed), the limit shared by both, the 429 and its fields, the
 * admin command reaching both replicas within a second, what is not counted, and Redis killed under
 * load. The tests run in order and share the bed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { runAdmin } from '../helpers/admin-cli';
import { faultBed, type Child, type FaultBed } from '../helpers/fault-bed';
import { createAccount, createKey } from '../helpers/fixtures';
import { logLines } from '../helpers/replicas';

const DOCS_URL = 'https://docs.rate-limits.test';
let bed: FaultBed;
let apis: Child[] = [];

interface Answer {
  status: number;
  headers: Headers;
  body: any;
  api: number;
}

/** An account with a full-scope key and one contact (so GET /v1/contacts/{md5} is 200 on the fast path). */
async function account(name: string): Promise<{ id: string; key: string; md5: string }> {
  const id = await createAccount(bed.sql, name);
  const key = await createKey(bed.sql, id);
  const email = `${crypto.randomUUID()}@rate.example`;
  const res = await fetch(`${apis[0]!.url}/v1/contacts`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ email }),
  });
  expect(res.status).toBe(201);
  return { id, key, md5: ((await res.json()) as { emailMd5: string }).emailMd5 };
}

/** The n-th request of a load: the two replicas in turn, a route with a claim from the key cache and one without. */
async function send(key: string, md5: string, n: number): Promise<Answer> {
  const api = n % 2;
  const path = (n >> 1) % 2 === 0 ? `/v1/contacts/${md5}` : '/v1/brands';
  const res = await fetch(`${apis[api]!.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, api };
}

/** `count` requests spread evenly over `ms`, all in flight at once where they overlap. */
async function spread(count: number, ms: number, one: (n: number) => Promise<Answer>): Promise<Answer[]> {
  return Promise.all(Array.from({ length: count }, (_, n) => Bun.sleep((n * ms) / count).then(() => one(n))));
}

const policyOf = (a: Answer) => a.headers.get('ratelimit-policy');
const stateOf = (a: Answer) => /^"account";r=(\d+);t=(\d+)$/.exec(a.headers.get('ratelimit') ?? '');

async function rateLimit(accountId: string, ...flags: string[]): Promise<Record<string, unknown>> {
  const run = await runAdmin(bed.databaseUrl, ['account', 'rate-limit', '--account', accountId, ...flags]);
  expect({ code: run.code, err: run.err }).toEqual({ code: 0, err: '' });
  return JSON.parse(run.out) as Record<string, unknown>;
}

/** GET /metrics of an API (while Redis is away it waits up to 3 s for the queue's gauges: scrape once). */
async function scrape(api: Child): Promise<string> {
  return (await fetch(`${api.url}/metrics`)).text();
}

function metric(text: string, name: string): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

beforeAll(async () => {
  bed = await faultBed({ DOCS_URL, LOG_LEVEL: 'info' });
  apis = [await bed.start('api'), await bed.start('api')];
}, 120_000);

afterAll(async () => {
  await bed?.stop();
});

describe('an account limited to 20/s, burst 20, on two replicas', () => {
  test('200 requests in 1 s: the burst and the rate over their span admitted, the rest 429; others 200', async () => {
    const limited = await account('limited');
    const other = await account('other');
    expect(await rateLimit(limited.id, '--per-second', '20', '--burst', '20')).toEqual({
      id: limited.id,
      perSecond: 20,
      burst: 20,
      default: false,
    });
    await Bun.sleep(1_000); // the invalidation of the account's cached key on both replicas
    const sentAt = performance.now();
    const [mine, others] = await Promise.all([
      spread(200, 1_000, (n) => send(limited.key, limited.md5, n)),
      spread(100, 1_000, (n) => send(other.key, other.md5, n)),
    ]);
    const spanS = (performance.now() - sentAt) / 1000;
    const admitted = mine.filter((a) => a.status === 200);
    const refused = mine.filter((a) => a.status !== 200);
    // At most the burst, the rate over the span in which the requests were admitted (from the first
    // sent to the last answered: about 1 s, more on a loaded machine), and the tokens each replica
    // reserves ahead (a tenth of the burst: 2). The store away would admit about all 200.
    const bound = 20 + Math.ceil(20 * spanS) + 2 * 2;
    console.log(JSON.stringify({ admitted: admitted.length, refused: refused.length, spanS, bound }));
    expect(admitted.length).toBeGreaterThanOrEqual(20);
    expect(admitted.length).toBeLessThanOrEqual(bound);
    // Both replicas admitted and refused: the limit is the account's, not a replica's.
    expect(new Set(admitted.map((a) => a.api)).size).toBe(2);
    expect(new Set(refused.map((a) => a.api)).size).toBe(2);
    for (const a of refused) {
      expect(a.status).toBe(429);
      expect(a.headers.get('content-type')).toStartWith('application/problem+json');
      expect(a.body).toMatchObject({
        status: 429,
        code: 'rate_limit_error',
        type: `${DOCS_URL}/error-codes#rate_limit_error`,
      });
      const retryAfter = Number(a.headers.get('retry-after'));
      expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
      expect(policyOf(a)).toBe('"account";q=20;w=1');
      expect(stateOf(a)?.slice(1)).toEqual(['0', String(retryAfter)]);
    }
    for (const a of admitted) {
      expect(policyOf(a)).toBe('"account";q=20;w=1');
      expect(Number(stateOf(a)![1])).toBeLessThanOrEqual(20);
    }
    expect(others.map((a) => a.status)).toEqual(others.map(() => 200));
    expect(new Set(others.map(policyOf))).toEqual(new Set(['"account";q=40000;w=2']));

    // Honest Retry-After: a request sent after the last one given is admitted, on either replica, and
    // the account is admitted again.
    const wait = Math.max(...refused.slice(-10).map((a) => Number(a.headers.get('retry-after'))));
    await Bun.sleep(wait * 1000);
    expect((await send(limited.key, limited.md5, 0)).status).toBe(200);
    expect((await send(limited.key, limited.md5, 3)).status).toBe(200);
    // Every refusal counted, under the account's own label value.
    const limitedMetric = `contact_service_rate_limited_requests_total{account="${limited.id}"}`;
    const [one, two] = await Promise.all(apis.map(scrape));
    expect(metric(one!, limitedMetric) + metric(two!, limitedMetric)).toBe(refused.length);
  }, 30_000);
});

describe('admin account rate-limit', () => {
  test('a new limit, and --default, reach both replicas within a second, keys cached or not', async () => {
    const acct = await account('admin');
    // Both replicas hold the key in their caches (the contact GET takes claims from it).
    for (let n = 0; n < 8; n++) expect(policyOf(await send(acct.key, acct.md5, n))).toBe('"account";q=40000;w=2');
    const seen = async (policy: string) => {
      const start = Date.now();
      for (;;) {
        const answers = await Promise.all([0, 1, 2, 3].map((n) => send(acct.key, acct.md5, n)));
        if (answers.every((a) => policyOf(a) === policy)) return Date.now() - start;
        if (Date.now() - start > 1_000) throw new Error(`not ${policy} within 1 s: ${answers.map(policyOf)}`);
        await Bun.sleep(20);
      }
    };
    expect(await rateLimit(acct.id, '--per-second', '50', '--burst', '150')).toMatchObject({
      perSecond: 50,
      burst: 150,
    });
    expect(await seen('"account";q=150;w=3')).toBeLessThan(1_000);
    expect(await rateLimit(acct.id, '--default')).toEqual({
      id: acct.id,
      perSecond: 20000,
      burst: 40000,
      default: true,
    });
    expect(await seen('"account";q=40000;w=2')).toBeLessThan(1_000);
    // Without flags: the limits as they are.
    expect(await rateLimit(acct.id)).toEqual({ id: acct.id, perSecond: 20000, burst: 40000, default: true });
    const bad = await runAdmin(bed.databaseUrl, [
      'account',
      'rate-limit',
      '--account',
      acct.id,
      '--per-second',
      '0',
      '--burst',
      '1',
    ]);
    expect(bad.code).toBe(2);
    const half = await runAdmin(bed.databaseUrl, ['account', 'rate-limit', '--account', acct.id, '--burst', '5']);
    expect(half.code).toBe(2);
  }, 30_000);
});

describe('what is not counted', () => {
  test('a 401 costs the account nothing and carries no RateLimit field; nor do the paths outside /v1', async () => {
    const acct = await account('unauthenticated flood');
    await rateLimit(acct.id, '--per-second', '1', '--burst', '3');
    await Bun.sleep(1_000);
    // `ck_<32 hex>_` and a secret that is not the key's.
    const wrong = acct.key.slice(0, 36) + 'x'.repeat(acct.key.length - 36);
    const flood = await Promise.all(Array.from({ length: 60 }, (_, n) => send(wrong, acct.md5, n)));
    expect(new Set(flood.map((a) => a.status))).toEqual(new Set([401]));
    expect(flood.filter((a) => a.headers.has('ratelimit') || a.headers.has('ratelimit-policy'))).toEqual([]);
    for (const path of ['/healthz', '/readyz', '/metrics', '/docs/json']) {
      for (const api of apis) {
        const res = await fetch(`${api.url}${path}`, { headers: { authorization: `Bearer ${acct.key}` } });
        await res.arrayBuffer();
        expect({ path, status: res.status, field: res.headers.get('ratelimit') }).toEqual({
          path,
          status: 200,
          field: null,
        });
      }
    }
    // The upload link needs no key and counts nothing (a token that is none: S3's XML refusal).
    const upload = await fetch(`${apis[0]!.url}/uploads/not-a-token`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${acct.key}` },
      body: 'Email\n',
    });
    await upload.arrayBuffer();
    expect(upload.status).toBeGreaterThanOrEqual(400);
    expect(upload.headers.get('ratelimit')).toBeNull();
    // The whole burst is still there: three in a row, then the fourth refused.
    const got = [];
    for (let n = 0; n < 4; n++) got.push((await send(acct.key, acct.md5, n)).status);
    expect(got).toEqual([200, 200, 200, 429]);
  }, 30_000);
});

describe('Redis killed under load', () => {
  test('no 5xx, admitted without a limit, a log line and the metrics; limited again once Redis is back', async () => {
    const acct = await account('redis away');
    await rateLimit(acct.id, '--per-second', '20', '--burst', '20');
    await Bun.sleep(1_000);
    const before = await spread(100, 500, (n) => send(acct.key, acct.md5, n));
    expect(before.filter((a) => a.status === 429).length).toBeGreaterThan(0);

    await bed.killRedis();
    // Well over the limit, on both replicas, while Redis is away.
    const away = await spread(300, 1_500, (n) => send(acct.key, acct.md5, n));
    expect(away.filter((a) => a.status >= 500)).toEqual([]);
    const admittedAway = away.filter((a) => a.status === 200).length;
    console.log(JSON.stringify({ admittedWhileRedisAway: admittedAway, of: away.length }));
    expect(admittedAway).toBeGreaterThan(250);
    const scraped = await Promise.all(apis.map(scrape));
    for (const [i, api] of apis.entries()) {
      expect(metric(scraped[i]!, 'contact_service_rate_limit_store_errors_total')).toBeGreaterThan(0);
      expect(metric(scraped[i]!, 'contact_service_rate_limit_unlimited_requests_total')).toBeGreaterThan(0);
      expect(metric(scraped[i]!, 'contact_service_rate_limit_store_up')).toBe(0);
      const down = (await logLines(api.log)).filter((l) => l.msg.startsWith('rate limit store unreachable'));
      expect(down.length).toBe(1); // once, however many requests went by
      expect(down[0]!.level).toBe('warn');
    }

    await bed.startRedis();
    const restarted = Date.now();
    const deadline = restarted + 15_000;
    let again: Answer[] = [];
    while (Date.now() < deadline) {
      again = await spread(100, 500, (n) => send(acct.key, acct.md5, n));
      expect(again.filter((a) => a.status >= 500)).toEqual([]);
      if (again.filter((a) => a.status === 429).length > 50) break;
      await Bun.sleep(500);
    }
    console.log(JSON.stringify({ limitedAgainWithinMs: Date.now() - restarted }));
    expect(again.filter((a) => a.status === 429).length).toBeGreaterThan(50);
    for (const api of apis) {
      expect(metric(await scrape(api), 'contact_service_rate_limit_store_up')).toBe(1);
      const back = (await logLines(api.log)).filter((l) => l.msg.startsWith('rate limit store reachable again'));
      expect(back.length).toBe(1);
    }
  }, 60_000);
});

/**
 * Prometheus metrics (issue 14, build item 3): the real API and worker processes of a fault bed, an
 * import run end to end through the API and the upload link, then both /metrics scraped and read
 * with a small parser of the text format. The request counters moved for the routes used, with
 * their status; the import counters match the import's own counts; the gauges are there; and no
 * label value anywhere is an id, an email, an md5 or the key.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { Registry } from 'prom-client';
import { connect, poolUsage } from '../../src/db';
import { freePort } from '../../src/embedded';
import { poolGauges } from '../../src/metrics/pool';
import { faultBed, type Child, type FaultBed } from '../helpers/fault-bed';
import { createAccount, createAttribute, createKey } from '../helpers/fixtures';

/** One sample of the exposition: metric name, labels and value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

interface Exposition {
  /** `# TYPE` of each metric family */
  types: Map<string, string>;
  samples: Sample[];
}

/** The Prometheus text format (0.0.4): `# TYPE` lines and samples; other comments are skipped. */
function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const type = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (type) types.set(type[1]!, type[2]!);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( \d+)?$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    samples.push({ name: m[1]!, labels: parseLabels(m[3] ?? ''), value: parseValue(m[4]!) });
  }
  return { types, samples };
}

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  const pair = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?/y;
  let m: RegExpExecArray | null;
  while (pair.lastIndex < text.length && (m = pair.exec(text))) {
    labels[m[1]!] = m[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
  }
  if (pair.lastIndex !== text.length) throw new Error(`labels not parsed: {${text}}`);
  return labels;
}

function parseValue(text: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  return Number(text);
}

/** The one sample of `name` whose labels include `labels`; undefined when none, an error when several. */
function sample(e: Exposition, name: string, labels: Record<string, string> = {}): number | undefined {
  const found = e.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} ${JSON.stringify(labels)}`);
  return found[0]?.value;
}

/**
 * Label values that would identify an account, a contact, an import or a key: a uuid (32 hex digits
 * with or without dashes: also an email's md5), an address, the key's prefix, or any of `secrets`.
 */
function identifyingLabels(e: Exposition, secrets: readonly string[]): string[] {
  const bad: string[] = [];
  for (const s of e.samples) {
    for (const [k, v] of Object.entries(s.labels)) {
      const lower = v.toLowerCase();
      if (
        /[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}/.test(lower) ||
        /@/.test(v) ||
        /ck_/.test(v) ||
        secrets.some((secret) => lower.includes(secret.toLowerCase()))
      )
        bad.push(`${s.name}{${k}="${v}"}`);
    }
  }
  return bad;
}

const P = 'contact_service_';
const ROWS = 3_000;
const STORED_IN_FILE = [...Array(1_000).keys()].filter((k) => k % 10 !== 9 && k % 250 !== 7).length;
/**
 * Every 10th row repeats the address 9 rows before it, every 250th is malformed; the first 1,000
 * addresses are stored already (STORED_IN_FILE of them are in the file).
 */
function csv(): string {
  const lines = ['Email,n'];
  for (let i = 0; i < ROWS; i++) {
    if (i % 250 === 7) lines.push(`not-an-address-${i},1`);
    else lines.push(`m${i % 10 === 9 ? i - 9 : i}@metrics.example,${i}`);
  }
  return `${lines.join('\n')}\n`;
}

let bed: FaultBed;
let api: Child;
let worker: Child;
let workerUrl: string;
let accountId: string;
let key: string;

async function call(method: string, path: string, body?: unknown, auth = true) {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: {
      ...(auth && { authorization: `Bearer ${key}` }),
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
}

async function scrape(url: string): Promise<{ text: string; contentType: string | null; e: Exposition }> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  return { text, contentType: res.headers.get('content-type'), e: parseExposition(text) };
}

/** What the import run below did, and both expositions before and after it. */
let view: any;
let polls = 0;
let apiBefore: Exposition;
let apiAfter: Exposition;
let workerBefore: Exposition;
let workerAfter: Exposition;
let apiText: string;
let workerText: string;
let apiContentType: string | null;
let importId: string;

beforeAll(async () => {
  bed = await faultBed({ IMPORT_BATCH_SIZE: '500' });
  accountId = await createAccount(bed.sql, 'metrics');
  await createAttribute(bed.sql, accountId, 'n', 'number');
  await bed.sql`
    insert into contacts (account_id, email_md5, email, attributes, brand_ids, enabled, first_source)
    select ${accountId}, md5(e)::uuid, e, jsonb_build_object('n', k % 2 * k), '{}', true, 'api'
    from (select k, 'm' || k || '@metrics.example' as e from generate_series(0, 999) k) stored`;
  key = await createKey(bed.sql, accountId);
  const port = await freePort();
  workerUrl = `http://127.0.0.1:${port}`;
  worker = await bed.start('worker', { WORKER_METRICS_PORT: String(port), HOST: '127.0.0.1' });
  api = await bed.start('api');
  const deadline = Date.now() + 30_000;
  while (
    !(await fetch(`${workerUrl}/metrics`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (Date.now() > deadline) throw new Error(`the worker's /metrics never answered:\n${await bed.tail(worker)}`);
    await Bun.sleep(100);
  }

  apiBefore = (await scrape(api.url!)).e;
  workerBefore = (await scrape(workerUrl)).e;

  const created = await call('POST', '/v1/contact-imports', {
    columns: ['Email', 'n'],
    duplicateContactStrategy: 'overwrite',
  });
  expect(created.status).toBe(201);
  importId = created.body.id;
  const put = await fetch(created.body.uploadUrl, { method: 'PUT', body: csv() });
  expect(put.status).toBe(200);
  const end = Date.now() + 60_000;
  for (;;) {
    const got = await call('GET', `/v1/contact-imports/${importId}`);
    polls++;
    expect(got.status).toBe(200);
    if (got.body.status === 'success' || got.body.status === 'failed') {
      view = got.body;
      break;
    }
    if (Date.now() > end) throw new Error(`import did not end: ${JSON.stringify(got.body)}\n${await bed.tail(worker)}`);
    await Bun.sleep(100);
  }
  // A contact by its md5, one the key may not read, and a path no route matches.
  expect(
    (await call('GET', `/v1/contacts/${createHash('md5').update('m1@metrics.example').digest('hex')}`)).status,
  ).toBe(200);
  expect((await call('GET', '/v1/contacts', undefined, false)).status).toBe(401);
  expect((await call('GET', `/v1/no-such-thing/${importId}`)).status).toBe(404);

  // `success` is committed before the job ends: its cleanup (staging dropped, the object removed) runs
  // after it, with the job still active. The queue gauges are read once the job is done.
  let a = await scrape(api.url!);
  for (const until = Date.now() + 10_000; Date.now() < until; a = await scrape(api.url!)) {
    const busy = ['waiting', 'active', 'delayed'].some(
      (state) => sample(a.e, `${P}queue_jobs`, { queue: 'contact-import', state }) !== 0,
    );
    if (!busy) break;
    await Bun.sleep(100);
  }
  apiAfter = a.e;
  apiText = a.text;
  apiContentType = a.contentType;
  const w = await scrape(workerUrl);
  workerAfter = w.e;
  workerText = w.text;
}, 120_000);

afterAll(async () => {
  await bed?.stop();
});

const moved = (before: Exposition, after: Exposition, name: string, labels: Record<string, string> = {}) =>
  (sample(after, name, labels) ?? 0) - (sample(before, name, labels) ?? 0);

describe('GET /metrics on the API', () => {
  test('is Prometheus text format 0.0.4, without a key, and no operation of the OpenAPI document', async () => {
    expect(view.status).toBe('success');
    expect(apiContentType).toStartWith('text/plain; version=0.0.4');
    const docs = await fetch(`${api.url}/docs/json`).then((r) => r.json() as Promise<any>);
    expect(Object.keys(docs.paths)).not.toContain('/metrics');
    expect(Object.keys(docs.paths)).toContain('/v1/contact-imports');
  });

  test('request counters moved for the routes used, by route template and status', () => {
    const req = `${P}http_requests_total`;
    expect(apiAfter.types.get(req)).toBe('counter');
    expect(moved(apiBefore, apiAfter, req, { method: 'POST', route: '/v1/contact-imports', status: '201' })).toBe(1);
    expect(moved(apiBefore, apiAfter, req, { method: 'PUT', route: '/uploads/:token', status: '200' })).toBe(1);
    expect(
      moved(apiBefore, apiAfter, req, { method: 'GET', route: '/v1/contact-imports/:importId', status: '200' }),
    ).toBe(polls);
    expect(moved(apiBefore, apiAfter, req, { method: 'GET', route: '/v1/contacts/:emailMd5', status: '200' })).toBe(1);
    // Refused before routing (authentication runs first): the route is unknown, as in the request log.
    expect(moved(apiBefore, apiAfter, req, { method: 'GET', route: 'unmatched', status: '401' })).toBe(1);
    expect(moved(apiBefore, apiAfter, req, { method: 'GET', route: 'unmatched', status: '404' })).toBe(1);
    // The scrape before the import is counted like any route, under its own fixed label.
    expect(sample(apiAfter, req, { method: 'GET', route: '/metrics', status: '200' })).toBeGreaterThanOrEqual(1);
  });

  test('the latency histogram has buckets up to +Inf, and its count is the request count', () => {
    const h = `${P}http_request_duration_seconds`;
    expect(apiAfter.types.get(h)).toBe('histogram');
    const labels = { method: 'GET', route: '/v1/contact-imports/:importId', status: '200' };
    const buckets = apiAfter.samples.filter(
      (s) => s.name === `${h}_bucket` && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
    );
    expect(buckets.length).toBeGreaterThan(5);
    expect(buckets.at(-1)!.labels.le).toBe('+Inf');
    expect(buckets.at(-1)!.value).toBe(polls);
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value);
    expect(sample(apiAfter, `${h}_count`, labels)).toBe(polls);
    expect(sample(apiAfter, `${h}_sum`, labels)).toBeGreaterThan(0);
  });

  test('imports by status show the success, and every status has a sample', () => {
    const g = `${P}imports`;
    expect(apiAfter.types.get(g)).toBe('gauge');
    expect(sample(apiAfter, g, { status: 'success' })).toBe(1);
    for (const status of ['awaiting-upload', 'uploaded', 'importing', 'failed'])
      expect(sample(apiAfter, g, { status })).toBe(0);
  });

  test('the import queue and the pool are shown', () => {
    for (const state of ['waiting', 'active', 'delayed', 'failed'])
      expect(sample(apiAfter, `${P}queue_jobs`, { queue: 'contact-import', state })).toBe(0);
    expect(sample(apiAfter, `${P}db_pool_size`)).toBe(10);
    const inUse = sample(apiAfter, `${P}db_pool_connections_in_use`)!;
    expect(inUse).toBeGreaterThanOrEqual(0);
    expect(inUse).toBeLessThanOrEqual(10);
    expect(sample(apiAfter, `${P}db_pool_waiting`)).toBe(0);
    expect(sample(apiAfter, `${P}process_resident_memory_bytes`)).toBeGreaterThan(0);
  });
});

describe("GET /metrics on the worker's own port", () => {
  test('rows read and merged match the import', () => {
    expect(view).toMatchObject({ status: 'success' });
    const rowsInFile = view.rowCount + view.duplicateInFileCount + view.malformedCount;
    expect(rowsInFile).toBe(ROWS);
    expect(moved(workerBefore, workerAfter, `${P}import_rows_read_total`)).toBe(ROWS);
    const merged = `${P}import_rows_merged_total`;
    expect(moved(workerBefore, workerAfter, merged, { outcome: 'added' })).toBe(view.addedCount);
    expect(moved(workerBefore, workerAfter, merged, { outcome: 'updated' })).toBe(view.updatedCount);
    expect(moved(workerBefore, workerAfter, merged, { outcome: 'skipped' })).toBe(view.skippedCount);
    expect(view.addedCount).toBeGreaterThan(0);
    expect(view.updatedCount + view.skippedCount).toBe(STORED_IN_FILE);
    expect(moved(workerBefore, workerAfter, `${P}imports_finished_total`, { status: 'success' })).toBe(1);
    expect(sample(workerAfter, `${P}imports_finished_total`, { status: 'failed' })).toBe(0);
  });

  test('each phase has an observation', () => {
    const h = `${P}import_phase_duration_seconds`;
    expect(workerAfter.types.get(h)).toBe('histogram');
    for (const phase of ['read', 'dedupe', 'merge', 'finish']) {
      expect(moved(workerBefore, workerAfter, `${h}_count`, { phase })).toBe(1);
      expect(sample(workerAfter, `${h}_bucket`, { phase, le: '+Inf' })).toBe(1);
    }
  });

  test('queue gauges for both queues, the stalled-job counter, and the pool', () => {
    for (const queue of ['contact-import', 'upload-sweep'])
      for (const state of ['waiting', 'active', 'delayed', 'failed'])
        expect(sample(workerAfter, `${P}queue_jobs`, { queue, state })).toBeNumber();
    expect(sample(workerAfter, `${P}queue_jobs`, { queue: 'contact-import', state: 'failed' })).toBe(0);
    expect(workerAfter.types.get(`${P}queue_stalled_jobs_total`)).toBe('counter');
    expect(sample(workerAfter, `${P}queue_stalled_jobs_total`, { queue: 'contact-import' })).toBe(0);
    // DATABASE_POOL_SIZE (10) raised to what the default 4 places need, and the worker's own loops:
    // 4 × (1 + 2 + 2) + 6 (worker/pool-size.ts).
    expect(sample(workerAfter, `${P}db_pool_size`)).toBe(26);
    expect(sample(workerAfter, `${P}db_pool_connections_in_use`)).toBeGreaterThanOrEqual(0);
  });

  test('answers 404 off /metrics', async () => {
    expect((await fetch(`${workerUrl}/`)).status).toBe(404);
  });
});

describe('the pool gauges', () => {
  test('count reservations, transactions and statements under way, and the demand past the pool size', async () => {
    const sql = connect(bed.databaseUrl, 3);
    const registry = new Registry();
    poolGauges(registry, sql);
    const gauges = async () => {
      const e = parseExposition(await registry.metrics());
      return [`${P}db_pool_size`, `${P}db_pool_connections_in_use`, `${P}db_pool_waiting`].map((n) => sample(e, n));
    };
    try {
      expect(await gauges()).toEqual([3, 0, 0]);
      const reserved = await sql.reserve();
      await reserved`select 1`; // on the reservation: not counted again
      expect(poolUsage(sql)!.held).toBe(1);
      let commit!: () => void;
      const open = new Promise<void>((resolve) => (commit = resolve));
      const tx = sql.begin(async (t) => {
        await t`select 1`;
        await open;
      });
      const sleeps = [1, 2, 3].map(() => sql`select pg_sleep(0.3)`.then(() => undefined));
      const fragment = sql`where true`; // never sent: holds nothing
      expect(fragment).toBeDefined();
      await Bun.sleep(50);
      expect(poolUsage(sql)!.held).toBe(5);
      expect(await gauges()).toEqual([3, 3, 2]);
      commit();
      await tx;
      reserved.release();
      await Promise.all(sleeps);
      expect(await gauges()).toEqual([3, 0, 0]);
      // A statement that fails releases what it held.
      await expect(sql`select 1/0`).rejects.toThrow();
      await expect(sql.unsafe('select nothing_here')).rejects.toThrow();
      await expect(sql.begin(async (t) => t`select 1/0`)).rejects.toThrow();
      expect(poolUsage(sql)!.held).toBe(0);
    } finally {
      await sql.end({ timeout: 2 });
    }
  });
});

describe('labels', () => {
  test('no label value in either exposition is an id, an email, an md5 or the key', () => {
    const secrets = [accountId, importId, key, key.split('_')[1]!];
    expect(identifyingLabels(apiAfter, secrets)).toEqual([]);
    expect(identifyingLabels(workerAfter, secrets)).toEqual([]);
    // Nor anywhere in the text (help included).
    for (const text of [apiText, workerText]) {
      for (const secret of secrets) expect(text.toLowerCase()).not.toContain(secret.toLowerCase());
      expect(text).not.toContain('@metrics.example');
    }
  });

  test('the check finds each kind of identifying value', () => {
    const e = parseExposition(
      [
        'x_total{route="/v1/contact-imports/0b7e0c3e-1d4f-4c2a-9d7e-2f1a3b4c5d6e"} 1',
        'x_total{route="/v1/contacts/9e107d9d372bb6826bd81d3542a419d6"} 1',
        'x_total{who="m1@metrics.example"} 1',
        'x_total{who="ck_abc_def"} 1',
        'x_total{who="plain \\"quoted\\" text",route="/v1/contacts"} 1',
      ].join('\n'),
    );
    expect(identifyingLabels(e, [])).toHaveLength(4);
    expect(e.samples[4]!.labels.who).toBe('plain "quoted" text');
  });
});

/**
 * Step `events` (issue 36, item 6): what brand-subscribe events cost an import and how fast they
 * get out. The narrow file A (no Brand column: each contact gets exactly the import's brand, so a
 * fresh account's import yields one event per distinct contact) is imported four times, each into
 * a fresh account with a brand the import assigns to every row: without a webhook endpoint (the
 * relay idle), with one pointing at a local receiver, then the other way round, to see the noise.
 * Each import is timed from the end of its upload to `success`, then checked (counts, contacts).
 * After each import without a relay, the account's feed is read whole with `limit=1000` (timed);
 * after each import with one, the step waits for the receiver to hold every event. Both then check
 * every event: its id once, none missing and none unknown (the file's distinct contacts are the
 * expected md5s), its brand, its import, its email against its md5; the receiver verifies every
 * batch's Standard Webhooks signature with the `standardwebhooks` package.
 */
import { Webhook } from 'standardwebhooks';
import type { Sql } from '../../src/db';
import { createBenchAccount, dropAccountContacts, type BenchAccount } from '../lib/account';
import { normalEmail } from '../lib/dataset';
import type { RunFiles } from '../lib/files';
import type { FileMeta } from '../lib/generate';
import type { ImportView } from '../lib/import-flow';
import { fix, fmtInt, table } from '../lib/format';
import { narrowEmail } from '../lib/narrow';
import { shapeOf, SHAPES, type ShapeName } from '../lib/shapes';
import type { Target } from '../lib/types';
import { checkContactCount, checkCounts, VerificationError } from '../lib/verify';

/** The targets at 1M events; the delivery's seconds grow with the events beyond 1M. */
export const EVENT_TARGETS = { feedEventsPerSecond: 100_000, deliverySecondsPer1M: 60, slowdown: 0.05 };
/** How long the step waits for the receiver (per 1M events, at least this) before it fails. */
const DELIVERY_TIMEOUT_PER_1M = 120;
const PAGE = 1000;

/**
 * Every event md5 the step expects, each seen at most once: 128-bit keys in one typed array (open
 * addressing), not a Set of strings, so 25M events fit in ~0.6 GB.
 */
export class Md5Ledger {
  private readonly keys: Uint32Array;
  /** 0 empty, 1 expected, 2 seen */
  private readonly state: Uint8Array;
  private readonly mask: number;
  expected = 0;
  seen = 0;

  constructor(capacity: number) {
    let slots = 1024;
    while (slots * 0.75 < capacity) slots *= 2;
    this.keys = new Uint32Array(slots * 4);
    this.state = new Uint8Array(slots);
    this.mask = slots - 1;
  }

  private readonly w = new Uint32Array(4);

  /** The slot of `hex`, or of the empty slot where it would go; -1 for a string that is no md5. */
  private find(hex: string): number {
    if (hex.length !== 32) return -1;
    const w = this.w;
    // By hand, not parseInt over slices: the receiver calls this for every event it gets.
    for (let k = 0; k < 4; k++) {
      let word = 0;
      for (let c = k * 8; c < k * 8 + 8; c++) {
        const ch = hex.charCodeAt(c);
        const digit = ch >= 48 && ch <= 57 ? ch - 48 : ch >= 97 && ch <= 102 ? ch - 87 : -1;
        if (digit < 0) return -1;
        word = (word << 4) | digit;
      }
      w[k] = word;
    }
    for (let s = w[0]! & this.mask; ; s = (s + 1) & this.mask) {
      const k = s * 4;
      if (this.state[s] === 0) {
        this.keys.set(w, k);
        return s;
      }
      if (this.keys[k] === w[0] && this.keys[k + 1] === w[1] && this.keys[k + 2] === w[2] && this.keys[k + 3] === w[3])
        return s;
    }
  }

  expect(hex: string): void {
    const s = this.find(hex);
    if (s < 0 || this.state[s] !== 0) throw new Error(`md5 ${hex} expected twice, or no md5`);
    if (this.expected + 1 > this.mask * 0.75) throw new Error('Md5Ledger: more md5s than its capacity');
    this.state[s] = 1;
    this.expected++;
  }

  /** `new` the first time an expected md5 is seen, `again` after, `unknown` for one never expected. */
  see(hex: string): 'new' | 'again' | 'unknown' {
    const s = this.find(hex);
    if (s < 0 || this.state[s] === 0) return 'unknown';
    if (this.state[s] === 2) return 'again';
    this.state[s] = 2;
    this.seen++;
    return 'new';
  }

  /** Every md5 expected again and none seen, for the next read. */
  reset(): void {
    for (let s = 0; s < this.state.length; s++) if (this.state[s] === 2) this.state[s] = 1;
    this.seen = 0;
  }
}

/** md5 of the trimmed, lowercased address (dataset.ts's md5Hex), ~4 × as fast as node:crypto's in Bun. */
export const emailMd5 = (email: string): string => Bun.MD5.hash(email.trim().toLowerCase(), 'hex');

/** A normal row's address without the rest of its row (rowAt builds every cell: 5 × slower). */
const NORMAL_EMAIL: Record<ShapeName, (i: number) => string> = { wide: normalEmail, narrow: narrowEmail };

/** The md5s of the file's distinct good contacts (its normal rows; a duplicate repeats one of them). */
export function expectedMd5s(file: FileMeta): Md5Ledger {
  const shape = shapeOf(file);
  const emailOf = NORMAL_EMAIL[shape.name];
  const ledger = new Md5Ledger(file.normal);
  for (let i = 0; i < file.rows; i++) if (shape.kindOf(i) === 'normal') ledger.expect(emailMd5(emailOf(i)));
  if (ledger.expected !== file.normal)
    throw new Error(`the model gives ${ledger.expected} contacts, not ${file.normal}`);
  return ledger;
}

export interface EventWant {
  brandId: string;
  importId: string;
}

/**
 * One event checked against what its import must have written; returns its emailMd5. The feed's
 * ids end with the md5 (sql/events/page.sql): with that checked, each md5 seen once is each id once.
 */
export function checkEvent(e: unknown, want: EventWant): string {
  const ev = e as {
    id?: unknown;
    type?: unknown;
    occurredAt?: unknown;
    data?: { email?: unknown; emailMd5?: unknown; brandId?: unknown; source?: { type?: unknown; importId?: unknown } };
  };
  const d = ev?.data;
  const md5 = d?.emailMd5;
  const bad = (what: string) => new VerificationError(`event ${JSON.stringify(e).slice(0, 300)}: ${what}`);
  if (typeof md5 !== 'string' || !/^[0-9a-f]{32}$/.test(md5)) throw bad('emailMd5 is no md5');
  if (typeof ev.id !== 'string' || !ev.id.startsWith('evt_') || !ev.id.endsWith(`_${md5}`))
    throw bad('id is not evt_…_<emailMd5>');
  if (ev.type !== 'contact.brand_subscribed') throw bad('type');
  if (typeof ev.occurredAt !== 'string' || Number.isNaN(Date.parse(ev.occurredAt))) throw bad('occurredAt');
  if (d!.brandId !== want.brandId) throw bad(`brandId is not the import's ${want.brandId}`);
  if (d!.source?.type !== 'import' || d!.source.importId !== want.importId)
    throw bad(`source is not import ${want.importId}`);
  if (typeof d!.email !== 'string' || emailMd5(d!.email) !== md5) throw bad('email does not hash to emailMd5');
  return md5;
}

type Ctx = { baseUrl: string; sql: Sql };

async function call<T>(ctx: Ctx, key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${ctx.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

export interface EventImport {
  relay: boolean;
  importId: string;
  /** end of the upload → success seen (sampled every 100 ms, as import-flow.ts does) */
  seconds: number;
}

/**
 * The real flow (POST, PUT, poll) with the import's brand on every row: runImportFlow's body has no
 * `brandIds`. Timed like it, from the upload's end to `success` seen by a 100 ms sample.
 */
async function importWithBrand(
  ctx: Ctx,
  account: BenchAccount,
  file: FileMeta,
  label: string,
  timeoutSeconds: number,
  onCreated: (importId: string) => void,
): Promise<{ importId: string; seconds: number; successAt: number }> {
  const created = await call<{ id: string; uploadUrl: string }>(ctx, account.key, 'POST', '/v1/contact-imports', {
    columns: shapeOf(file).columns,
    duplicateContactStrategy: 'overwrite',
    brandIds: account.brandIds,
    publishBrandSubscribeEvents: true,
  });
  if (created.status !== 201) throw new Error(`${label}: create import answered ${created.status}`);
  const { id, uploadUrl } = created.body;
  onCreated(id);
  const put = await fetch(uploadUrl, {
    method: 'PUT',
    headers: { 'content-type': 'text/csv' },
    body: Bun.file(file.path),
  });
  if (!put.ok) throw new Error(`${label}: upload answered ${put.status} ${(await put.text()).slice(0, 300)}`);
  const uploadEndAt = performance.now();
  for (;;) {
    const [row] = await ctx.sql<{ status: string }[]>`
      select status from contact_imports where account_id = ${account.id} and id = ${id}`;
    if (row?.status === 'success' || row?.status === 'failed') break;
    if (performance.now() - uploadEndAt > timeoutSeconds * 1000)
      throw new Error(`${label}: import ${id} not final after ${timeoutSeconds} s`);
    await Bun.sleep(100);
  }
  const successAt = performance.now();
  const view = (await call<ImportView>(ctx, account.key, 'GET', `/v1/contact-imports/${id}`)).body;
  if (view.status !== 'success') throw new Error(`${label}: import ${id} failed: ${view.failureReason}`);
  checkCounts(view, file, label, 'added');
  await checkContactCount(ctx.sql, account.id, file.normal, label);
  const seconds = (successAt - uploadEndAt) / 1000;
  return { importId: id, seconds, successAt };
}

export interface FeedRead {
  events: number;
  pages: number;
  /** the pages' requests and JSON parses, summed (the checks between them not counted) */
  seconds: number;
  eventsPerSecond: number;
  /** the whole read with the checks */
  wallSeconds: number;
  /** from success until the sequencer had placed every event */
  placedAfterSeconds: number;
}

/** Waits until every event of the account has its feed position; seconds since `since`. */
async function placed(sql: Sql, accountId: string, expected: number, since: number, timeout: number) {
  for (;;) {
    const [r] = await sql<{ unplaced: number; events: number }[]>`
      select count(*) filter (where position is null)::int as unplaced,
             coalesce(sum(cardinality(email_md5s)), 0)::int as events
      from brand_subscribe_events where account_id = ${accountId}`;
    if (r!.unplaced === 0 && r!.events === expected) return (performance.now() - since) / 1000;
    if (performance.now() - since > timeout * 1000)
      throw new VerificationError(`events: ${JSON.stringify(r)} after ${timeout} s, expected ${expected} placed`);
    await Bun.sleep(50);
  }
}

/** The account's whole feed from no cursor, `limit=1000` until an empty page, every event checked. */
async function readFeed(ctx: Ctx, key: string, ledger: Md5Ledger, want: EventWant) {
  ledger.reset();
  const started = performance.now();
  let seconds = 0;
  let pages = 0;
  let events = 0;
  let after: string | undefined;
  for (;;) {
    const t0 = performance.now();
    const q = after === undefined ? '' : `&after=${encodeURIComponent(after)}`;
    const res = await fetch(`${ctx.baseUrl}/v1/events?limit=${PAGE}${q}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const page = (await res.json()) as { data: unknown[]; next: string };
    seconds += (performance.now() - t0) / 1000;
    if (res.status !== 200) throw new VerificationError(`events: GET /v1/events answered ${res.status}`);
    pages++;
    if (page.data.length > PAGE) throw new VerificationError(`events: a page of ${page.data.length} events`);
    for (const e of page.data) {
      const seen = ledger.see(checkEvent(e, want));
      if (seen !== 'new') throw new VerificationError(`events: the feed gave ${JSON.stringify(e)} (${seen})`);
    }
    events += page.data.length;
    if (page.data.length === 0) break;
    after = page.next;
  }
  if (ledger.seen !== ledger.expected)
    throw new VerificationError(`events: the feed gave ${ledger.seen} events, expected ${ledger.expected}`);
  const wallSeconds = (performance.now() - started) / 1000;
  return { events, pages, seconds, eventsPerSecond: events / seconds, wallSeconds };
}

export interface Delivery {
  events: number;
  batches: number;
  largestBatch: number;
  webhookIds: number;
  /** an event again in a batch with a webhook-id not seen before: a bug */
  duplicates: number;
  /** an event again in a batch resent with its webhook-id: a retry, not a bug */
  redelivered: number;
  badSignatures: number;
  /** delivered when the import's success was seen */
  atSuccess: number;
  /** from success to the first event (negative: it came before success was seen) */
  firstAfterSuccessSeconds: number;
  /** from success to the last new event (negative: all were in before success was seen) */
  lastAfterSuccessSeconds: number;
  /** events over first to last arrival */
  eventsPerSecond: number;
  /** the receiver's own time: reading, verifying and checking the batches */
  receiverSeconds: number;
}

/**
 * A local webhook receiver (Bun.serve on 127.0.0.1, a free port): verifies each batch's signature,
 * checks and counts its events, answers 204 (401 for a bad signature, so the relay retries).
 */
function startReceiver(ledger: Md5Ledger) {
  let wh: Webhook | undefined;
  let want: EventWant | undefined;
  const webhookIds = new Set<string>();
  const s = { batches: 0, largestBatch: 0, duplicates: 0, redelivered: 0, badSignatures: 0, busyMs: 0 };
  let firstAt = 0;
  let lastNewAt = 0;
  /** each batch's arrival and the events delivered after it */
  const arrivals: { at: number; seen: number }[] = [];
  const problems: string[] = [];
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: async (req) => {
      const t0 = performance.now();
      const body = await req.text();
      const h = (name: string) => req.headers.get(name) ?? '';
      const id = h('webhook-id');
      const w = want;
      let payload: { type?: unknown; data?: unknown };
      try {
        if (!wh || !w) throw new Error('not armed');
        const headers = { 'webhook-id': id, 'webhook-timestamp': h('webhook-timestamp') };
        payload = wh.verify(body, { ...headers, 'webhook-signature': h('webhook-signature') }) as typeof payload;
      } catch {
        s.badSignatures++;
        return new Response(null, { status: 401 });
      }
      const known = webhookIds.has(id);
      webhookIds.add(id);
      const data = Array.isArray(payload.data) ? payload.data : [];
      if (payload.type !== 'events' || data.length < 1 || data.length > PAGE)
        problems.push(`batch ${id}: type ${String(payload.type)}, ${data.length} events`);
      s.batches++;
      s.largestBatch = Math.max(s.largestBatch, data.length);
      firstAt ||= t0;
      for (const e of data) {
        try {
          const seen = ledger.see(checkEvent(e, w));
          if (seen === 'new') lastNewAt = t0;
          else if (seen === 'again') s[known ? 'redelivered' : 'duplicates']++;
          else problems.push(`batch ${id}: an event of no contact of the file: ${JSON.stringify(e).slice(0, 200)}`);
        } catch (err) {
          problems.push(`batch ${id}: ${(err as Error).message}`);
        }
      }
      arrivals.push({ at: t0, seen: ledger.seen });
      s.busyMs += performance.now() - t0;
      return new Response(null, { status: 204 });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/hooks`,
    /** Ready for one endpoint's deliveries of one import's events. */
    arm(secret: string, w: EventWant) {
      ledger.reset();
      wh = new Webhook(secret);
      want = w;
      webhookIds.clear();
      Object.assign(s, { batches: 0, largestBatch: 0, duplicates: 0, redelivered: 0, badSignatures: 0, busyMs: 0 });
      firstAt = lastNewAt = 0;
      arrivals.length = problems.length = 0;
    },
    figures: (successAt: number): Delivery => ({
      events: ledger.seen,
      batches: s.batches,
      largestBatch: s.largestBatch,
      duplicates: s.duplicates,
      redelivered: s.redelivered,
      badSignatures: s.badSignatures,
      webhookIds: webhookIds.size,
      atSuccess: arrivals.findLast((a) => a.at <= successAt)?.seen ?? 0,
      firstAfterSuccessSeconds: (firstAt - successAt) / 1000,
      lastAfterSuccessSeconds: (lastNewAt - successAt) / 1000,
      eventsPerSecond: ledger.seen / Math.max(1e-3, (lastNewAt - firstAt) / 1000),
      receiverSeconds: s.busyMs / 1000,
    }),
    problems,
    stop: () => server.stop(true),
  };
}

type Receiver = ReturnType<typeof startReceiver>;

/**
 * Waits until the receiver holds every event the import yields, or `timeout` seconds after its
 * success; fails on a bad signature, a bad or unknown event, a duplicate that is no retry, or any
 * event missing.
 */
async function awaitDelivery(
  receiver: Receiver,
  ledger: Md5Ledger,
  run: { successAt: number },
  timeout: number,
  label: string,
): Promise<Delivery> {
  while (ledger.seen < ledger.expected && performance.now() - run.successAt < timeout * 1000) await Bun.sleep(20);
  const d = receiver.figures(run.successAt);
  const fail = (what: string) => new VerificationError(`${label}: ${what}`);
  if (receiver.problems.length)
    throw fail(`${receiver.problems.length} bad batch(es) or event(s), first: ${receiver.problems[0]}`);
  if (d.badSignatures) throw fail(`${d.badSignatures} batch(es) with a signature that does not verify`);
  if (d.duplicates) throw fail(`${d.duplicates} event(s) delivered again under a new webhook-id`);
  if (d.events < ledger.expected)
    throw fail(`the receiver got ${d.events} of ${ledger.expected} events within ${timeout.toFixed(0)} s of success`);
  return d;
}

/** An endpoint of the account pointing at the receiver, made as a client makes one: its id and secret. */
async function createEndpoint(ctx: Ctx, account: BenchAccount, url: string): Promise<{ id: string; secret: string }> {
  const made = await call<{ id: string; secret: string }>(ctx, account.key, 'POST', '/v1/webhook-endpoints', { url });
  if (made.status !== 201 || !made.body.secret?.startsWith('whsec_'))
    throw new Error(`events: create webhook endpoint answered ${made.status} ${JSON.stringify(made.body)}`);
  return made.body;
}

async function deleteEndpoint(ctx: Ctx, account: BenchAccount, id: string): Promise<void> {
  const res = await call(ctx, account.key, 'DELETE', `/v1/webhook-endpoints/${id}`);
  if (res.status !== 204) throw new Error(`events: delete webhook endpoint answered ${res.status}`);
}

export interface EventsRun {
  file: { path: string; rows: number; contacts: number };
  /** events each import yields: its distinct contacts × its one brand */
  events: number;
  /** in the order run: without, with, with, without */
  imports: EventImport[];
  feeds: FeedRead[];
  deliveries: Delivery[];
  withoutRelaySeconds: number;
  withRelaySeconds: number;
  /** with / without, the means of both orders */
  ratio: number;
}

export interface EventsOptions {
  timeoutSeconds: number;
  files?: RunFiles;
}

export async function runEvents(
  ctx: Ctx,
  runId: string,
  file: FileMeta,
  opts: EventsOptions,
  log: (m: string) => void,
): Promise<EventsRun> {
  log(`[events] the md5s of the ${fmtInt(file.normal)} contacts of ${file.path}`);
  const ledger = expectedMd5s(file);
  const events = file.normal;
  const per1M = Math.max(1, events / 1e6);
  const receiver = startReceiver(ledger);
  const imports: EventImport[] = [];
  const feeds: FeedRead[] = [];
  const deliveries: Delivery[] = [];
  await opts.files?.ready(file);
  try {
    for (const relay of [false, true, true, false]) {
      const n = imports.length + 1;
      const label = `events import ${n} (${relay ? 'with relay' : 'without relay'})`;
      const shape = { attributes: SHAPES.narrow.attributes, brands: ['Events brand'] };
      const account = await createBenchAccount(ctx.sql, `${runId} events ${n}`, shape);
      const endpoint = relay ? await createEndpoint(ctx, account, receiver.url) : undefined;
      const brandId = account.brandIds[0]!;
      // The receiver checks each event's import id: known once the import is created, before its upload.
      const armReceiver = (importId: string) => endpoint && receiver.arm(endpoint.secret, { brandId, importId });
      const run = await importWithBrand(ctx, account, file, label, opts.timeoutSeconds, armReceiver);
      imports.push({ relay, importId: run.importId, seconds: run.seconds });
      log(`[events] ${label}: ${run.seconds.toFixed(2)} s`);
      const want = { brandId, importId: run.importId };
      if (endpoint) {
        const delivery = await awaitDelivery(receiver, ledger, run, DELIVERY_TIMEOUT_PER_1M * per1M, label);
        await deleteEndpoint(ctx, account, endpoint.id);
        deliveries.push(delivery);
        log(
          `[events] delivery of ${label}: ${fmtInt(delivery.events)} events, the last ` +
            `${delivery.lastAfterSuccessSeconds.toFixed(2)} s after success`,
        );
      } else {
        const placedAfterSeconds = await placed(ctx.sql, account.id, events, run.successAt, 60 * per1M);
        const read = await readFeed(ctx, account.key, ledger, want);
        feeds.push({ ...read, placedAfterSeconds });
        log(`[events] feed of ${label}: ${fmtInt(read.events)} events, ${fmtInt(read.eventsPerSecond)} events/s`);
      }
      await dropAccountContacts(ctx.sql, account.id);
    }
  } finally {
    receiver.stop();
  }
  await opts.files?.read(file);
  const mean = (relay: boolean) => {
    const runs = imports.filter((r) => r.relay === relay);
    return runs.reduce((s, r) => s + r.seconds, 0) / runs.length;
  };
  const [withoutRelaySeconds, withRelaySeconds] = [mean(false), mean(true)];
  const fileInfo = { path: file.path, rows: file.rows, contacts: file.normal };
  return {
    file: fileInfo,
    events,
    imports,
    feeds,
    deliveries,
    withoutRelaySeconds,
    withRelaySeconds,
    ratio: withRelaySeconds / withoutRelaySeconds,
  };
}

/** The delivery target for `events`: 60 s at 1M events, as many more seconds per 1M beyond. */
export const deliveryTarget = (events: number) => EVENT_TARGETS.deliverySecondsPer1M * Math.max(1, events / 1e6);

/** The step's tables for the printed summary. */
export function eventsTable(run: EventsRun): string {
  const n = (k: number) => `${k + 1} ${run.imports[k]!.relay ? 'with relay' : 'without relay'}`;
  const nth = (relay: boolean, k: number) =>
    run.imports.map((r, i) => ({ r, i })).filter((x) => x.r.relay === relay)[k]!.i;
  // Imports 1 and 2 ran without, then with the relay; 3 and 4 with, then without.
  const sec = (k: number) => run.imports[k]!.seconds;
  const pairs = `${fix(sec(1) / sec(0), 3)} (2 / 1), ${fix(sec(2) / sec(3), 3)} (3 / 4)`;
  const head =
    `events: ${SHAPES.narrow.label('file A')} ${fmtInt(run.file.rows)} rows, ${fmtInt(run.events)} events an ` +
    'import (its brand on every contact), each import into a fresh account';
  const imports = table(
    ['import', 'seconds'],
    run.imports.map((r, k) => [n(k), fix(r.seconds, 2)]),
  );
  const means = `${fix(run.withRelaySeconds, 2)} / ${fix(run.withoutRelaySeconds, 2)} s`;
  const ratio =
    `with relay / without: ${fix(run.ratio, 3)} (the means, ${means}; each order: ${pairs}), ` +
    `target <= ${1 + EVENT_TARGETS.slowdown}`;
  const feed = table(
    ['feed read, limit=1000', 'events', 'pages', 'seconds', 'events/s', 'target', 'wall s', 'placed after success s'],
    run.feeds.map((f, k) => [
      `after import ${nth(false, k) + 1}`,
      fmtInt(f.events),
      fmtInt(f.pages),
      fix(f.seconds, 2),
      fmtInt(f.eventsPerSecond),
      `>= ${fmtInt(EVENT_TARGETS.feedEventsPerSecond)}`,
      fix(f.wallSeconds, 2),
      fix(f.placedAfterSeconds, 2),
    ]),
  );
  const delivery = table(
    [
      'webhook delivery',
      'events',
      'batches',
      'largest',
      'webhook-ids',
      'dup',
      'resent',
      'at success',
      'first after success s',
      'last after success s',
      'target',
      'events/s',
      'receiver s',
    ],
    run.deliveries.map((d, k) => [
      `of import ${nth(true, k) + 1}`,
      fmtInt(d.events),
      fmtInt(d.batches),
      fmtInt(d.largestBatch),
      fmtInt(d.webhookIds),
      fmtInt(d.duplicates),
      fmtInt(d.redelivered),
      fmtInt(d.atSuccess),
      fix(d.firstAfterSuccessSeconds, 2),
      fix(d.lastAfterSuccessSeconds, 2),
      `<= ${deliveryTarget(run.events)}`,
      fmtInt(d.eventsPerSecond),
      fix(d.receiverSeconds, 2),
    ]),
  );
  return [head, imports, ratio, feed, delivery].join('\n\n');
}

export function eventsTargets(run: EventsRun): Target[] {
  const slowdown = run.ratio - 1;
  const means = `${run.withRelaySeconds.toFixed(2)} / ${run.withoutRelaySeconds.toFixed(2)} s`;
  const within = deliveryTarget(run.events);
  return [
    ...run.feeds.map((f, k) => ({
      name: `events: feed read ${k + 1}, limit=1000`,
      value: `${fmtInt(f.eventsPerSecond)} events/s`,
      target: `>= ${fmtInt(EVENT_TARGETS.feedEventsPerSecond)} events/s`,
      pass: f.eventsPerSecond >= EVENT_TARGETS.feedEventsPerSecond,
    })),
    ...run.deliveries.map((d, k) => ({
      name: `events: webhook delivery ${k + 1}, the last event after the import's success`,
      value: `${d.lastAfterSuccessSeconds.toFixed(2)} s`,
      target: `<= ${within} s`,
      pass: d.lastAfterSuccessSeconds <= within,
    })),
    {
      name: `events: import with the relay vs without (${means})`,
      value: `${slowdown >= 0 ? '+' : ''}${(slowdown * 100).toFixed(1)} %`,
      target: `<= +${EVENT_TARGETS.slowdown * 100} %`,
      pass: slowdown <= EVENT_TARGETS.slowdown,
    },
  ];
}

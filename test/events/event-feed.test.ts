// GET /v1/events (issue 36): the brand-subscribe events in the order they became visible, with a
// cursor that never skips a set committing late and never repeats one; the retention sweep.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { after, formatCursor } from '../../src/events/cursor';
import { pruneEvents } from '../../src/events/retention';
import { sequenceEvents } from '../../worker/events/sequencer';
import { runImport } from '../../worker/import/index';
import { expectProblem, testApp, type TestApp } from '../helpers/app';
import { stageImport, tempStore, testConfig } from '../helpers/file-store';
import { createAccount, createBrand, createKey } from '../helpers/fixtures';

let t: TestApp;
let files: Awaited<ReturnType<typeof tempStore>>;

beforeAll(async () => {
  t = await testApp();
  files = await tempStore();
});
afterAll(async () => {
  await t.close();
  await files.remove();
});

const md5 = (email: string) => createHash('md5').update(email.toLowerCase()).digest('hex');
const uuidOf = (hex: string) =>
  `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;

interface FeedEvent {
  id: string;
  type: string;
  occurredAt: string;
  data: { email: string; emailMd5: string; brandId: string; source: { type: string; importId?: string } };
}

async function account() {
  const id = await createAccount(t.db.sql);
  const key = await createKey(t.db.sql, id);
  const brand = await createBrand(t.db.sql, id, 'Brand A');
  const other = await createBrand(t.db.sql, id, 'Brand B');
  const create = async (email: string, brandIds: string[] = [brand], extra: Record<string, unknown> = {}) => {
    const res = await t.call('POST', '/v1/contacts', { key, body: { email, brandIds, ...extra } });
    if (res.status !== 201) throw new Error(`create ${email}: ${res.status} ${JSON.stringify(res.body)}`);
  };
  const feed = (query = '') => t.call('GET', `/v1/events${query}`, { key });
  /** Every event from `after` on, page by page, with the last `next`. */
  const readAll = async (limit: number, after?: string) => {
    const events: FeedEvent[] = [];
    let next = after;
    for (;;) {
      const res = await feed(`?limit=${limit}${next ? `&after=${next}` : ''}`);
      expect(res.status).toBe(200);
      events.push(...res.body.data);
      if (res.body.data.length === 0) return { events, next: res.body.next as string };
      next = res.body.next;
    }
  };
  return { id, key, brand, other, create, feed, readAll };
}

describe('GET /v1/events', () => {
  test('an event per brand newly assigned, with the shape of issue 36, once placed', async () => {
    const a = await account();
    await a.create('First@Example.com', [a.brand, a.other]);
    await a.create('quiet@example.com', [a.brand], { publishBrandSubscribeEvents: false });
    expect((await a.feed()).body.data).toEqual([]); // not placed yet: invisible, not lost
    await sequenceEvents(t.db.sql);
    const res = await a.feed();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    const events = res.body.data as FeedEvent[];
    expect(events).toHaveLength(2);
    for (const e of events) {
      expect(e.type).toBe('contact.brand_subscribed');
      expect(e.id).toMatch(/^evt_/);
      expect(new Date(e.occurredAt).toISOString()).toBe(e.occurredAt);
      expect(e.data.email).toBe('First@Example.com');
      expect(e.data.emailMd5).toBe(md5('first@example.com'));
      expect(e.data.source).toEqual({ type: 'api' });
    }
    expect(new Set(events.map((e) => e.data.brandId))).toEqual(new Set([a.brand, a.other]));
    expect(new Set(events.map((e) => e.id)).size).toBe(2);
    // The same ids every time.
    expect((await a.feed()).body.data.map((e: FeedEvent) => e.id)).toEqual(events.map((e) => e.id));
    // Adding a brand the contact already has records nothing new.
    await t.call('POST', `/v1/contacts/${md5('first@example.com')}/brands`, {
      key: a.key,
      body: { brandIds: [a.brand] },
    });
    await sequenceEvents(t.db.sql);
    expect((await a.readAll(10)).events).toHaveLength(2);
  });

  test("an import's events: one per (contact, brand) newly assigned, from the import; none unpublished", async () => {
    const a = await account();
    await a.create('known@example.com', [a.brand]); // has Brand A already: only Brand B is new to it
    await sequenceEvents(t.db.sql);
    const before = await a.readAll(100);
    const rows = ['Email', 'known@example.com', ...Array.from({ length: 9 }, (_, i) => `imp${i}@example.com`)];
    const csv = rows.join('\n') + '\n';
    const run = async (publishEvents: boolean) => {
      const id = await stageImport(t.db.sql, files.store, a.id, csv, {
        columns: ['Email'],
        brandIds: [a.brand, a.other],
        publishEvents,
      });
      // Batches of 4 rows: the import's sets commit batch by batch, interleaved with nothing.
      await runImport({ sql: t.db.sql, storage: files.store, config: testConfig(4) }, a.id, id);
      return id;
    };
    const importId = await run(true);
    await sequenceEvents(t.db.sql);
    const { events, next } = await a.readAll(5, before.next);
    expect(events).toHaveLength(1 + 9 * 2);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    for (const e of events) expect(e.data.source).toEqual({ type: 'import', importId });
    expect(events.filter((e) => e.data.email === 'known@example.com').map((e) => e.data.brandId)).toEqual([a.other]);
    for (const e of events) expect(e.data.emailMd5).toBe(md5(e.data.email));
    // The same file again, unpublished, over contacts without the brands: nothing recorded.
    await t.db.sql`update contacts set brand_ids = '{}' where account_id = ${a.id}`;
    await run(false);
    await sequenceEvents(t.db.sql);
    expect((await a.readAll(100, next)).events).toEqual([]);
  });

  test('pages continue right after the last event; an empty page keeps its place', async () => {
    const a = await account();
    for (let i = 0; i < 25; i++) await a.create(`p${i}@example.com`);
    await sequenceEvents(t.db.sql);
    const all = (await a.feed('?limit=1000')).body.data as FeedEvent[];
    expect(all).toHaveLength(25);
    expect((await a.feed()).body.data).toHaveLength(25); // default limit 100
    const { events, next } = await a.readAll(7);
    expect(events.map((e) => e.id)).toEqual(all.map((e) => e.id));
    // Polling with the empty page's next: nothing, then exactly what came since.
    expect((await a.feed(`?after=${next}`)).body).toEqual({ data: [], next });
    await a.create('late@example.com');
    await sequenceEvents(t.db.sql);
    const more = await a.feed(`?after=${next}`);
    expect(more.body.data.map((e: FeedEvent) => e.data.email)).toEqual(['late@example.com']);
  });

  test('a set that took its id first and commits last comes after the others, none skipped or repeated', async () => {
    const a = await account();
    await a.create('before@example.com');
    await sequenceEvents(t.db.sql);
    const start = await a.readAll(100);
    expect(start.events).toHaveLength(1);

    // A transaction takes its set's id, then stays open while later writes commit and are placed.
    const held = await t.db.sql.reserve();
    const heldEmails = ['held1@example.com', 'held2@example.com', 'held3@example.com'];
    try {
      await held`begin`;
      for (const email of heldEmails)
        await held`insert into contacts (account_id, email_md5, email, brand_ids, first_source)
                   values (${a.id}, ${uuidOf(md5(email))}, ${email}, ${[a.brand]}, 'api')`;
      const sorted = [...heldEmails].sort((x, y) => (md5(x) < md5(y) ? -1 : 1));
      await held`insert into brand_subscribe_events (account_id, brand_id, email_md5s, emails, source)
                 values (${a.id}, ${a.brand}, ${sorted.map((e) => uuidOf(md5(e)))}, ${sorted}, 'api')`;
      for (let i = 0; i < 5; i++) await a.create(`after${i}@example.com`);
      await sequenceEvents(t.db.sql);
      const during = await a.readAll(2, start.next);
      expect(during.events.map((e) => e.data.email)).toEqual([0, 1, 2, 3, 4].map((i) => `after${i}@example.com`));
      await held`commit`;
      await sequenceEvents(t.db.sql);
      const rest = await a.readAll(2, during.next);
      // The late set, after everything already read, within itself in md5 order.
      expect(rest.events.map((e) => e.data.email)).toEqual([...heldEmails].sort((x, y) => (md5(x) < md5(y) ? -1 : 1)));
      // Read from the start again: the same events, each once, in the same order.
      const whole = await a.readAll(3);
      expect(whole.events.map((e) => e.id)).toEqual(
        [...start.events, ...during.events, ...rest.events].map((e) => e.id),
      );
    } finally {
      await held`rollback`.catch(() => {});
      held.release();
    }
  });

  test('concurrent writers and sequencers: every event exactly once, in position order', async () => {
    const a = await account();
    const seen: FeedEvent[] = [];
    let next: string | undefined;
    const poll = async () => {
      const res = await a.feed(`?limit=13${next ? `&after=${next}` : ''}`);
      expect(res.status).toBe(200);
      seen.push(...res.body.data);
      next = res.body.next;
    };
    const writers = Array.from({ length: 4 }, async (_, w) => {
      for (let i = 0; i < 30; i++) await a.create(`w${w}-${i}@example.com`, [a.brand, a.other]);
    });
    let writing = true;
    const sequencers = Array.from({ length: 2 }, async () => {
      while (writing) await sequenceEvents(t.db.sql);
    });
    const reader = (async () => {
      while (writing) await poll();
    })();
    await Promise.all(writers);
    writing = false;
    await Promise.all([...sequencers, reader]);
    await sequenceEvents(t.db.sql);
    for (let i = 0; i < 20; i++) await poll();
    expect(seen).toHaveLength(240);
    expect(new Set(seen.map((e) => e.id)).size).toBe(240);
    const positions = await t.db.sql<{ position: number }[]>`
      select position from brand_subscribe_events where account_id = ${a.id} order by position`;
    expect(positions.map((p) => Number(p.position))).toEqual(positions.map((_, i) => i + 1)); // no gaps
  });

  test("an account sees only its own events; an erased address's events are not shown", async () => {
    const a = await account();
    const b = await account();
    await a.create('mine@example.com');
    await b.create('theirs@example.com');
    await a.create('gone@example.com');
    await sequenceEvents(t.db.sql);
    expect((await t.call('DELETE', `/v1/contacts/${md5('gone@example.com')}`, { key: a.key })).status).toBe(204);
    const page = await a.feed();
    expect(page.body.data.map((e: FeedEvent) => e.data.email)).toEqual(['mine@example.com']);
    // The hidden event still moved the cursor: nothing comes after it.
    expect((await a.feed(`?after=${page.body.next}`)).body.data).toEqual([]);
  });

  test('400 for a malformed cursor or limit, naming the parameter; unknown and repeated parameters', async () => {
    const a = await account();
    const bad = async (query: string, parameter: string) => {
      const body = expectProblem(await a.feed(query), 400, 'invalid_request_error');
      expect(body.errors?.[0]?.parameter).toBe(parameter);
    };
    await bad('?limit=0', 'limit');
    await bad('?limit=1001', 'limit');
    await bad('?limit=ten', 'limit');
    await bad('?limit=1.5', 'limit');
    await bad('?limit=', 'limit');
    await bad('?after=nonsense', 'after');
    await bad('?after=', 'after');
    await bad(`?after=${Buffer.from('v2.-1.0').toString('base64url')}`, 'after');
    await bad(`?after=${Buffer.from('v2.0.0').toString('base64url')}`, 'after');
    await bad(`?after=${Buffer.from('v2.01.0').toString('base64url')}`, 'after');
    await bad(`?after=${formatCursor({ position: 1, index: 0 })}x`, 'after');
    await bad(`?after=${formatCursor({ position: 1, index: 0 })}=`, 'after');
    await bad('?cursor=abc', 'cursor');
    await bad('?limit=5&limit=6', 'limit');
    expect((await a.feed('?limit=1')).status).toBe(200);
    expect((await a.feed('?limit=1000')).status).toBe(200);
  });

  test('a well-spelled cursor the feed did not give out is 400 at after; every one it gave out works', async () => {
    const a = await account();
    const refused = async (c: { position: number; index: number } | string) => {
      const text = typeof c === 'string' ? Buffer.from(c).toString('base64url') : formatCursor(c);
      const body = expectProblem(await a.feed(`?after=${text}`), 400, 'invalid_request_error');
      expect(body.errors).toEqual([{ parameter: 'after', detail: expect.stringContaining('not a cursor') }]);
    };
    // Nothing placed yet: the end is the start of position 1, and nothing past it exists.
    const empty = await a.feed();
    expect(empty.body).toEqual({ data: [], next: formatCursor({ position: 1, index: 0 }) });
    expect((await a.feed(`?after=${empty.body.next}`)).status).toBe(200);
    await refused({ position: 2, index: 0 });
    await refused({ position: 1, index: 1 });

    await a.create('c1@example.com');
    await a.create('c2@example.com');
    // An import's sets (one per part of its merge), of more than one event each.
    const emails = ['c1', 'c2', ...[3, 4, 5, 6, 7, 8].map((i) => `c${i}`)].map((e) => `${e}@example.com`);
    const csv = `Email\n${emails.slice(2).join('\n')}\n`;
    const id = await stageImport(t.db.sql, files.store, a.id, csv, { columns: ['Email'], brandIds: [a.brand] });
    await runImport({ sql: t.db.sql, storage: files.store, config: testConfig(100) }, a.id, id);
    await sequenceEvents(t.db.sql);
    const sets = await t.db.sql<{ position: number; size: number }[]>`
      select position::int, size from brand_subscribe_events where account_id = ${a.id} order by position`;
    const end = sets.at(-1)!.position + 1;
    const big = sets.reduce((x, y) => (y.size > x.size ? y : x));
    expect(big.size).toBeGreaterThan(1);

    // The issue's hand-made cursor, and every place past the end or inside a set past its end.
    await refused('v2.999999999999999.0');
    await refused({ position: end + 1, index: 0 });
    await refused({ position: end, index: 1 });
    await refused({ position: big.position, index: big.size });
    await refused({ position: 1, index: 1 });

    // Every cursor the feed gives out, page by page of one, is taken back; so is the end, which
    // reads nothing until more is placed and then exactly what came after it.
    const seen: string[] = [];
    let next: string | undefined;
    for (;;) {
      const res = await a.feed(`?limit=1${next ? `&after=${next}` : ''}`);
      expect(res.status).toBe(200);
      if (res.body.data.length === 0) break;
      seen.push(res.body.data[0].data.email);
      next = res.body.next;
    }
    expect(seen.sort()).toEqual(emails.sort());
    expect(next).toBe(formatCursor({ position: end, index: 0 }));
    const lastOfBig = await a.feed(`?after=${formatCursor({ position: big.position, index: big.size - 1 })}`);
    expect(lastOfBig.status).toBe(200);
    expect(lastOfBig.body.data.length).toBeGreaterThan(0);
    await a.create('c9@example.com');
    await sequenceEvents(t.db.sql);
    const later = await a.feed(`?after=${next}`);
    expect(later.body.data.map((e: FeedEvent) => e.data.email)).toEqual(['c9@example.com']);
    // Another account's feed is its own: a place only this one reached is past that one's end.
    const b = await account();
    expectProblem(await b.feed(`?after=${next}`), 400, 'invalid_request_error');
  });

  test('the scope events:read; 401 without a key', async () => {
    const a = await account();
    const narrow = await createKey(t.db.sql, a.id, ['contacts:read']);
    expectProblem(await t.call('GET', '/v1/events', { key: narrow }), 403, 'permission_error');
    const reader = await createKey(t.db.sql, a.id, ['events:read']);
    expect((await t.call('GET', '/v1/events', { key: reader })).status).toBe(200);
    expectProblem(await t.call('GET', '/v1/events', { key: null }), 401, 'authentication_error');
  });

  test('the retention removes a prefix of old sets; a cursor before it gets 410, none starts after it', async () => {
    const a = await account();
    for (let i = 0; i < 4; i++) await a.create(`r${i}@example.com`);
    await sequenceEvents(t.db.sql);
    const first = await a.feed('?limit=1');
    const all = (await a.feed()).body.data as FeedEvent[];
    // Positions 1, 2 and 4 are old; 3 is recent: only 1 and 2 may go (3 holds 4 back).
    await t.db.sql`
      update brand_subscribe_events set created_at = now() - interval '8 days'
      where account_id = ${a.id} and position in (1, 2, 4)`;
    const moved = await pruneEvents(t.db.sql, 7);
    expect(moved).toContainEqual({ accountId: a.id, through: 2 });
    const res = await a.feed();
    expect(res.body.data.map((e: FeedEvent) => e.id)).toEqual(all.slice(2).map((e) => e.id));
    const gone = expectProblem(await a.feed(`?after=${first.body.next}`), 410, 'conflict_error');
    expect(gone.errors?.[0]?.parameter).toBe('after');
    expect(gone.detail).toContain('retention');
    // A cursor past the whole of the last set removed still continues; one inside it lost events.
    expect((await a.feed(`?after=${formatCursor(after(2))}`)).status).toBe(200);
    expectProblem(await a.feed(`?after=${formatCursor({ position: 2, index: 0 })}`), 410, 'conflict_error');
    // Nothing within retention is removed.
    expect(await pruneEvents(t.db.sql, 7)).not.toContainEqual(expect.objectContaining({ accountId: a.id }));
  });

  test('the retention crosses a gap of 10^12 positions (a restore) at once; a cursor in it lost nothing', async () => {
    const a = await account();
    for (let i = 0; i < 2; i++) await a.create(`g${i}@example.com`);
    await sequenceEvents(t.db.sql);
    // What docs/backups.md's restore step does: the head moves on by 10^12.
    await t.db.sql`update event_feed_heads set sequenced_through = sequenced_through + 1000000000000
      where account_id = ${a.id}`;
    const end = (await a.feed()).body.next as string;
    for (let i = 2; i < 4; i++) await a.create(`g${i}@example.com`);
    await sequenceEvents(t.db.sql);
    await t.db.sql`
      update brand_subscribe_events set created_at = now() - interval '8 days'
      where account_id = ${a.id} and position <= 2`;
    const started = performance.now();
    expect(await pruneEvents(t.db.sql, 7)).toContainEqual({ accountId: a.id, through: 2 });
    expect(performance.now() - started).toBeLessThan(5_000);
    // The consumer at the old end, in the gap now, lost nothing: it reads both new sets.
    const res = await a.feed(`?after=${end}`);
    expect(res.status).toBe(200);
    expect(res.body.data.map((e: FeedEvent) => e.data.email)).toEqual(['g2@example.com', 'g3@example.com']);
    expect((await a.feed()).body.data.map((e: FeedEvent) => e.data.email)).toEqual([
      'g2@example.com',
      'g3@example.com',
    ]);
    expectProblem(await a.feed(`?after=${formatCursor({ position: 2, index: 0 })}`), 410, 'conflict_error');
    // Both old sets went, and the new ones past the gap: every set removed, none left behind.
    await t.db.sql`update brand_subscribe_events set created_at = now() - interval '8 days' where account_id = ${a.id}`;
    expect(await pruneEvents(t.db.sql, 7)).toContainEqual({ accountId: a.id, through: 1_000_000_000_004 });
    expect((await a.feed()).body.data).toEqual([]);
  });
});

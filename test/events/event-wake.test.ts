/**
 * The "events committed" hint (src/events/wake.ts): a write that records brand-subscribe events
 * wakes the event sequencer through Redis once it committed, so its events reach the feed at once,
 * while the sequencer's own looks are rare (worker/index.ts). Here the sequencer looks unasked
 * only once, at its start: whatever reaches the feed after that came by a hint.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { EventsCommittedHint, onEventsCommitted } from '../../src/events/wake';
import { runLoop, type Loop } from '../../worker/events/loop';
import { sequenceEvents } from '../../worker/events/sequencer';
import { testApp, type TestApp } from '../helpers/app';
import { createBrand } from '../helpers/fixtures';
import { testServices } from '../helpers/services';

let t: TestApp;
let hint: EventsCommittedHint;
let sequencer: Loop;
let hints: ReturnType<typeof onEventsCommitted>;
const placed: string[] = [];
let passes = 0;

beforeAll(async () => {
  const { redisUrl } = await testServices();
  hint = new EventsCommittedHint(redisUrl);
  t = await testApp({ eventsHint: hint });
  // An hour between unasked looks: longer than this file.
  sequencer = runLoop('test sequencer', 3_600_000, () => {
    passes++;
    return sequenceEvents(t.db.sql, (a) => placed.push(a));
  });
  hints = onEventsCommitted(redisUrl, () => sequencer.poke());
  await hints.ready;
});
afterAll(async () => {
  await sequencer.stop();
  await hints.close();
  await hint.close();
  await t.close();
});

/** The account's feed, asked every 20 ms until it holds `n` events or `ms` passed. */
async function feedOf(n: number, ms: number) {
  const until = Date.now() + ms;
  for (;;) {
    const res = await t.call('GET', '/v1/events');
    expect(res.status).toBe(200);
    const data = res.body.data as { data: { email: string } }[];
    if (data.length >= n || Date.now() > until) return data.map((e) => e.data.email);
    await Bun.sleep(20);
  }
}

test('a create that assigns a brand, and an assignment after, reach the feed within a second', async () => {
  const brand = await createBrand(t.db.sql, t.accountId, 'Woken');
  const other = await createBrand(t.db.sql, t.accountId, 'Woken too');
  await Bun.sleep(100); // the sequencer's one unasked look is over

  const created = await t.call('POST', '/v1/contacts', { body: { email: 'woken@example.com', brandIds: [brand] } });
  expect(created.status).toBe(201);
  expect(await feedOf(1, 1_000)).toEqual(['woken@example.com']);

  const added = await t.call('POST', `/v1/contacts/${created.body.emailMd5}/brands`, { body: { brandIds: [other] } });
  expect(added.status).toBe(200);
  expect(await feedOf(2, 1_000)).toEqual(['woken@example.com', 'woken@example.com']);
  expect(placed).toEqual([t.accountId, t.accountId]);
});

test('a write that records no event sends no hint: the sequencer does not look', async () => {
  await Bun.sleep(100);
  const before = passes;
  const brand = await createBrand(t.db.sql, t.accountId, 'Quiet');
  const quiet = await t.call('POST', '/v1/contacts', {
    body: { email: 'quiet@example.com', brandIds: [brand], publishBrandSubscribeEvents: false },
  });
  expect(quiet.status).toBe(201);
  expect((await t.call('POST', '/v1/contacts', { body: { email: 'plain@example.com' } })).status).toBe(201);
  await Bun.sleep(300);
  expect(passes).toBe(before);
  // A hint does make it look.
  hint.committed();
  await Bun.sleep(300);
  expect(passes).toBe(before + 1);
});

// The events step's own pieces, without a service: the ledger of expected md5s, the file's
// contacts as the step expects them, each event's checks and the step's targets.
import { afterAll, describe, expect, test } from 'bun:test';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { md5Hex } from '../lib/dataset';
import { checkEvent, emailMd5, eventsTargets, expectedMd5s, Md5Ledger, type EventsRun } from './events';
import { generateCsv } from '../lib/generate';
import { SHAPES } from '../lib/shapes';

const dir = join(tmpdir(), `bench-events-${process.pid}`);
afterAll(() => rm(dir, { recursive: true, force: true }));

const md5s = (n: number) => Array.from({ length: n }, (_, i) => md5Hex(`c${i}@example.com`));

test("emailMd5 is dataset.ts's md5Hex, faster", () => {
  for (const email of ['a@b.c', '  Ada.X1@Example.NET ', 'ü@ß.de']) expect(emailMd5(email)).toBe(md5Hex(email));
});

describe('Md5Ledger', () => {
  test('sees each expected md5 once, then again, and knows no other', () => {
    const ledger = new Md5Ledger(5000);
    const all = md5s(5000);
    for (const m of all) ledger.expect(m);
    expect(ledger.expected).toBe(5000);
    expect(all.map((m) => ledger.see(m)).every((r) => r === 'new')).toBe(true);
    expect(ledger.see(all[17]!)).toBe('again');
    expect(ledger.see(md5Hex('stranger@example.com'))).toBe('unknown');
    expect(ledger.see('not-an-md5')).toBe('unknown');
    expect(ledger.see(all[3]!.toUpperCase())).toBe('unknown');
    expect(ledger.see(`${all[3]!.slice(0, 31)}g`)).toBe('unknown');
    expect(ledger.seen).toBe(5000);
  });

  test('reset expects every md5 again, and the same md5 cannot be expected twice', () => {
    const ledger = new Md5Ledger(10);
    const [a, b] = md5s(2);
    ledger.expect(a!);
    ledger.expect(b!);
    ledger.see(a!);
    ledger.reset();
    expect(ledger.seen).toBe(0);
    expect(ledger.see(a!)).toBe('new');
    expect(() => ledger.expect(b!)).toThrow();
  });

  test('md5s that share their first 32 bits are told apart', () => {
    const ledger = new Md5Ledger(4);
    const a = `00000001${'0'.repeat(24)}`;
    const b = `00000001${'0'.repeat(23)}1`;
    ledger.expect(a);
    expect(ledger.see(b)).toBe('unknown');
    expect(ledger.see(a)).toBe('new');
  });
});

describe("the narrow file's contacts", () => {
  test.each(['narrow', 'wide'] as const)(
    "are the %s file's normal rows' addresses, as many as its meta counts, repeats not counted again",
    async (shape) => {
      const path = join(dir, SHAPES[shape].fileName(3000, 0));
      const file = await generateCsv(path, 3000, 0, () => {}, shape);
      const ledger = expectedMd5s(file);
      expect(ledger.expected).toBe(file.normal);
      for (let i = 0; i < file.rows; i++) {
        const row = SHAPES[shape].rowAt(i, 0);
        if (row.kind !== 'malformed') expect(ledger.see(md5Hex(row.email))).not.toBe('unknown');
      }
      expect(ledger.seen).toBe(file.normal);
    },
  );
});

describe('checkEvent', () => {
  const want = { brandId: '6f1c5a52-4b7e-4f7e-9a1e-2c1d5e3f4a5b', importId: '0e9c1f7a-2b3c-4d5e-8f90-a1b2c3d4e5f6' };
  const email = 'Ada.X1@Example.net';
  const md5 = md5Hex(email);
  const event = () => ({
    id: `evt_42_${md5}`,
    type: 'contact.brand_subscribed',
    occurredAt: '2026-11-28T10:00:00.000Z',
    data: { email, emailMd5: md5, brandId: want.brandId, source: { type: 'import', importId: want.importId } },
  });

  test("gives the event's md5 when it is the import's", () => {
    expect(checkEvent(event(), want)).toBe(md5);
  });

  test.each([
    ['an id that does not end with the md5', (e: ReturnType<typeof event>) => void (e.id = 'evt_42_x')],
    ['another type', (e: ReturnType<typeof event>) => void (e.type = 'contact.created')],
    ['another brand', (e: ReturnType<typeof event>) => void (e.data.brandId = want.importId)],
    ['another import', (e: ReturnType<typeof event>) => void (e.data.source.importId = want.brandId)],
    ['an api source', (e: ReturnType<typeof event>) => void (e.data.source = { type: 'api' } as never)],
    ['an email of another md5', (e: ReturnType<typeof event>) => void (e.data.email = 'other@example.net')],
    ['no occurredAt', (e: ReturnType<typeof event>) => void (e.occurredAt = 'yesterday')],
  ])('refuses %s', (_, spoil) => {
    const e = event();
    spoil(e);
    expect(() => checkEvent(e, want)).toThrow();
  });
});

describe('eventsTargets', () => {
  const run = (over: Partial<EventsRun>): EventsRun => ({
    file: { path: 'f', rows: 1_000_000, contacts: 990_000 },
    events: 990_000,
    imports: [],
    feeds: [
      { events: 990_000, pages: 991, seconds: 9, eventsPerSecond: 110_000, wallSeconds: 12, placedAfterSeconds: 0.2 },
    ],
    deliveries: [
      {
        events: 990_000,
        batches: 990,
        largestBatch: 1000,
        webhookIds: 990,
        duplicates: 0,
        redelivered: 0,
        badSignatures: 0,
        atSuccess: 900_000,
        firstAfterSuccessSeconds: 0.5,
        lastAfterSuccessSeconds: 4,
        eventsPerSecond: 80_000,
        receiverSeconds: 2,
      },
    ],
    withoutRelaySeconds: 10,
    withRelaySeconds: 10.4,
    ratio: 1.04,
    ...over,
  });

  test('pass at the issue targets, and miss past them', () => {
    expect(eventsTargets(run({})).every((t) => t.pass)).toBe(true);
    const slow = eventsTargets(run({ ratio: 1.06, withRelaySeconds: 10.6 }));
    expect(slow.find((t) => t.name.includes('relay'))!.pass).toBe(false);
  });

  test('give the delivery 60 s per 1M events beyond 1M', () => {
    const big = run({ events: 5_000_000 });
    big.deliveries[0]!.lastAfterSuccessSeconds = 250;
    expect(eventsTargets(big).find((t) => t.name.includes('delivery'))).toMatchObject({
      target: '<= 300 s',
      pass: true,
    });
  });
});

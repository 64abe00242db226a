/**
 * An import gives way in proportion to the API's load and to the harm it takes, not to its presence
 * (src/imports/api-load.ts, worker/import/pace.ts): the busy key carries the API's requests a second
 * as a share of the most it has served and its mean time per request over its usual time at that
 * rate, the worker reads them, and a paced piece rests share / (1 - share) times its own time, at
 * most IMPORT_PACE, weighted by the harm (none up to HARM_FROM, all from HARM_FULL). Real Redis.
 */
import { describe, expect, test } from 'bun:test';
import IORedis from 'ioredis';
import { ApiLoad, ApiLoadSignal, parseLoad } from '../../src/imports/api-load';
import { HARM_FROM, HARM_FULL, PaceTurn, Pacer, restFactor } from '../../worker/import/pace';
import { testServices } from '../helpers/services';

describe('how long a paced piece rests', () => {
  test('an API loaded half way leaves the import half the time: a rest as long as the piece', () => {
    expect(restFactor(4, { share: 0.5 })).toBe(1);
    expect(restFactor(4, { share: 0.2 })).toBeCloseTo(0.25, 10);
    expect(restFactor(4, { share: 0 })).toBe(0);
  });

  test('a saturated API, or one that sends no figure, gets the full pace', () => {
    expect(restFactor(4, { share: 0.8 })).toBe(4);
    expect(restFactor(4, { share: 1 })).toBe(4);
    expect(restFactor(4, { share: 1.7 })).toBe(4);
    expect(restFactor(4, undefined)).toBe(4);
    expect(restFactor(0, { share: 0.5 })).toBe(0);
  });

  test('an API no slower than usual takes no rest, however loaded; a slowed one up to what its load leaves', () => {
    expect(restFactor(4, { share: 0.8, harm: 1 })).toBe(0);
    expect(restFactor(4, { share: 0.8, harm: HARM_FROM })).toBe(0);
    expect(restFactor(4, { share: 0.5, harm: (HARM_FROM + HARM_FULL) / 2 })).toBeCloseTo(0.5, 10);
    expect(restFactor(4, { share: 0.5, harm: HARM_FULL })).toBe(1);
    expect(restFactor(4, { share: 0.8, harm: 40 })).toBe(4);
    expect(restFactor(4, { share: 0, harm: 40 })).toBe(0);
  });

  test('the key’s value: the share and the harm; the share alone; no figure at all reads as saturated', () => {
    expect(parseLoad('0.53 1.42')).toEqual({ share: 0.53, harm: 1.42 });
    expect(parseLoad('0.53')).toEqual({ share: 0.53 });
    expect(parseLoad('busy')).toEqual({ share: 1 });
  });
});

describe('a merge’s batches in flight share one turn', () => {
  test('their paced pieces and rests never overlap; unpaced ones do', async () => {
    const turn = new PaceTurn();
    const source = { pace: 4, apiBusy: () => true, apiLoad: () => ({ share: 0.5, harm: 10 }) };
    const batches = [new Pacer(source, turn), new Pacer(source, turn)];
    // Each piece and its rest as [start, end] ms; a rest as long as the piece (share 0.5).
    const spans: [number, number][] = [];
    const piece = () => Bun.sleep(20);
    const run = async (pacer: Pacer, paced: boolean) => {
      for (let i = 0; i < 3; i++) {
        let start = 0;
        await pacer.piece(paced, async () => {
          start = performance.now();
          await piece();
        });
        spans.push([start, performance.now()]);
      }
    };
    const t0 = performance.now();
    await Promise.all(batches.map((b) => run(b, true)));
    // Six pieces of 20 ms, each resting 20 ms after, one at a time: about 240 ms, not 120.
    expect(performance.now() - t0).toBeGreaterThan(220);
    spans.sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < spans.length; i++) expect(spans[i]![0]).toBeGreaterThanOrEqual(spans[i - 1]![1] - 1);
    expect(batches.map((b) => b.pieces)).toEqual([3, 3]);

    const t1 = performance.now();
    await Promise.all(batches.map((b) => run(b, false)));
    expect(performance.now() - t1).toBeLessThan(110);
  });
});

describe('the busy key carries the API’s load and harm', () => {
  test('the worker reads the figure the API wrote, 0 once the key lapses', async () => {
    const { redisUrl } = await testServices();
    const key = `test:api-busy:${crypto.randomUUID()}`;
    const signal = new ApiLoadSignal(redisUrl, 40, key);
    const reader = new ApiLoad(redisUrl, key);
    const redis = new IORedis(redisUrl);
    try {
      // `perTick` requests of 5 ms every 50 ms for `seconds`, what the worker read after each tick.
      const seen: { written: string | null; read: number }[] = [];
      const serve = async (perTick: number, seconds: number) => {
        const end = Date.now() + seconds * 1_000;
        while (Date.now() < end) {
          for (let i = 0; i < perTick; i++) {
            signal.hit();
            signal.served(5);
          }
          await Bun.sleep(50);
          if (reader.busy()) seen.push({ written: await redis.get(key), read: reader.load().share });
        }
      };
      // 480 requests a second, the most it serves, then 240: a share near 0.5 once the smoothing
      // (about a second) has caught up.
      await serve(24, 2);
      expect(seen.at(-1)!.read).toBeGreaterThan(0.85);
      await serve(12, 2);
      const last = seen.at(-1)!;
      expect(last.read).toBeGreaterThan(0.35);
      expect(last.read).toBeLessThan(0.65);
      // What the worker reads is what some window wrote: a figure with two decimals, not a flag.
      expect(seen.some((s) => s.written !== null && parseLoad(s.written).share === s.read)).toBe(true);
      const lapsed = Date.now() + 3_000;
      while (reader.busy() && Date.now() < lapsed) await Bun.sleep(50);
      expect(reader.busy()).toBe(false);
      expect(reader.load()).toEqual({ share: 0 });
    } finally {
      await Promise.all([signal.close(), reader.close()]);
      redis.disconnect();
    }
  });

  test('a key holding no figure (an API before the load was published wrote `1`) reads as fully loaded', async () => {
    const { redisUrl } = await testServices();
    const key = `test:api-busy:${crypto.randomUUID()}`;
    const redis = new IORedis(redisUrl);
    const reader = new ApiLoad(redisUrl, key);
    try {
      await redis.set(key, 'busy', 'PX', 2_000);
      const end = Date.now() + 2_000;
      while (!reader.busy() && Date.now() < end) await Bun.sleep(20);
      expect(reader.busy()).toBe(true);
      expect(reader.load()).toEqual({ share: 1 });
      expect(restFactor(4, reader.load())).toBe(4);
    } finally {
      await reader.close();
      redis.disconnect();
    }
  });

  test('the harm: requests three times slower than usual read as about 3, and 1 again once they are not', async () => {
    const { redisUrl } = await testServices();
    const key = `test:api-busy:${crypto.randomUUID()}`;
    const signal = new ApiLoadSignal(redisUrl, 40, key);
    const reader = new ApiLoad(redisUrl, key);
    // 240 requests a second of `ms` each for `seconds`; the harm the worker read last.
    // 240 requests a second of `ms` each for `seconds`, or until the harm the worker reads passes
    // `done` (a slow machine's timers fire late, and the smoothing then takes more than its second).
    const serve = async (ms: number, seconds: number, done: (harm: number) => boolean = () => false) => {
      const end = Date.now() + seconds * 1_000;
      while (Date.now() < end && !done(reader.load().harm ?? 1)) {
        for (let i = 0; i < 12; i++) {
          signal.hit();
          signal.served(ms);
        }
        await Bun.sleep(50);
      }
      return reader.load().harm;
    };
    try {
      // 4 s: the smoothed rate settles, so the slow spell is judged at the rate the usual time was seen at.
      expect(await serve(5, 4)).toBeCloseTo(1, 1);
      // Three times the usual time: the harm climbs to about 3 (within 10 % once the smoothing has
      // caught up) and never past it.
      const slowed = await serve(15, 10, (h) => h > 2.7);
      expect(slowed).toBeGreaterThan(2.7);
      expect(await serve(15, 1)).toBeLessThan(3.1);
      expect(await serve(5, 10, (h) => h < 1.15)).toBeLessThan(1.15);
    } finally {
      await Promise.all([signal.close(), reader.close()]);
    }
  });
});

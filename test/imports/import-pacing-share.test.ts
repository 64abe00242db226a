/**
 * An import gives way in proportion to the API's load, not to its presence (src/imports/api-load.ts,
 * worker/import/pace.ts): the busy key carries the API's requests in flight as a share of
 * SATURATED_IN_FLIGHT, the worker reads it, and a paced piece rests share / (1 - share) times its
 * own time, at most IMPORT_PACE. Real Redis.
 */
import { describe, expect, test } from 'bun:test';
import IORedis from 'ioredis';
import { ApiLoad, ApiLoadSignal } from '../../src/imports/api-load';
import { restFactor } from '../../worker/import/pace';
import { testServices } from '../helpers/services';

describe('how long a paced piece rests', () => {
  test('an API loaded half way leaves the import half the time: a rest as long as the piece', () => {
    expect(restFactor(4, 0.5)).toBe(1);
    expect(restFactor(4, 0.2)).toBeCloseTo(0.25, 10);
    expect(restFactor(4, 0)).toBe(0);
  });

  test('a saturated API, or one that sends no figure, gets the full pace', () => {
    expect(restFactor(4, 0.8)).toBe(4);
    expect(restFactor(4, 1)).toBe(4);
    expect(restFactor(4, 1.7)).toBe(4);
    expect(restFactor(4, undefined)).toBe(4);
    expect(restFactor(0, 0.5)).toBe(0);
  });
});

describe('the busy key carries the API’s requests in flight', () => {
  test('the worker reads the figure the API wrote, 0 once the key lapses', async () => {
    const { redisUrl } = await testServices();
    const key = `test:api-busy:${crypto.randomUUID()}`;
    const signal = new ApiLoadSignal(redisUrl, 40, key);
    const reader = new ApiLoad(redisUrl, key);
    const redis = new IORedis(redisUrl);
    try {
      // 240 requests a second of 20 ms each for 2 s: about 4.8 in flight, a share near 0.48 once the
      // smoothing (about a second) has caught up.
      const seen: { written: string | null; read: number }[] = [];
      const end = Date.now() + 2_000;
      while (Date.now() < end) {
        for (let i = 0; i < 12; i++) {
          signal.hit();
          signal.served(20);
        }
        await Bun.sleep(50);
        if (reader.busy()) seen.push({ written: await redis.get(key), read: reader.share() });
      }
      expect(seen.length).toBeGreaterThan(0);
      const last = seen.at(-1)!;
      expect(last.read).toBeGreaterThan(0.15);
      expect(last.read).toBeLessThan(0.7);
      // What the worker reads is what some window wrote: a figure with two decimals, not a flag.
      expect(seen.some((s) => s.written !== null && Number(s.written) === s.read)).toBe(true);
      const lapsed = Date.now() + 3_000;
      while (reader.busy() && Date.now() < lapsed) await Bun.sleep(50);
      expect(reader.busy()).toBe(false);
      expect(reader.share()).toBe(0);
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
      expect(reader.share()).toBe(1);
      expect(restFactor(4, reader.share())).toBe(4);
    } finally {
      await reader.close();
      redis.disconnect();
    }
  });
});

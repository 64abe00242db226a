// The rate-limit store's timeout (src/ratelimit/store.ts answeredWithin): a Redis that does not answer
// in time counts as away, but an answer that came in time while the API's event loop was busy is
// taken. Before, the expired timer ran ahead of the socket's read: a loaded API turned every
// account's limit off for a second ("rate limit store unreachable: Command timed out").
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import IORedis from 'ioredis';
import { answeredWithin, StoreTimeoutError } from '../../src/ratelimit/store';
import { testServices } from '../helpers/services';

let redis: IORedis;

beforeAll(async () => {
  redis = new IORedis((await testServices()).redisUrl, { maxRetriesPerRequest: 0 });
  await redis.ping();
});
afterAll(async () => {
  await redis.quit();
});

/** The event loop held for `ms`: a GC pause, a burst of requests, a process not scheduled. */
function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

describe('answeredWithin', () => {
  test('an answer that arrived while the loop was busy past the timeout is taken, not a timeout', async () => {
    for (let i = 0; i < 5; i++) {
      const answer = answeredWithin(redis.ping(), 20);
      // Redis answers within the stall (it has 250 ms, even on a loaded machine); the reply waits on
      // the socket while the timer expires.
      busy(250);
      expect(await answer).toBe('PONG');
    }
  });

  test('no answer within the time is a StoreTimeoutError, after it and not before', async () => {
    const started = performance.now();
    let late: (v: string) => void = () => {};
    const error = await answeredWithin(new Promise<string>((r) => (late = r)), 50).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreTimeoutError);
    expect(String(error)).toContain('within 50 ms');
    expect(performance.now() - started).toBeGreaterThanOrEqual(49);
    late('too late'); // an answer after the verdict changes nothing
  });

  test("Redis's own error passes through; a failure after the verdict does not escape", async () => {
    const refused = await answeredWithin(redis.call('NO-SUCH-COMMAND'), 1_000).catch((e: unknown) => e);
    expect(String(refused)).toContain('unknown command');

    const escaped: unknown[] = [];
    const onEscape = (e: unknown) => escaped.push(e);
    process.on('unhandledRejection', onEscape);
    try {
      let fail: (e: Error) => void = () => {};
      const verdict = await answeredWithin(new Promise<string>((_, reject) => (fail = reject)), 10).catch(
        (e: unknown) => e,
      );
      expect(verdict).toBeInstanceOf(StoreTimeoutError);
      fail(new Error('connection closed'));
      await Bun.sleep(20);
      expect(escaped).toEqual([]);
    } finally {
      process.off('unhandledRejection', onEscape);
    }
  });
});

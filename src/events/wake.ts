import IORedis, { type Redis } from 'ioredis';

/**
 * "Events committed": a hint, through Redis, that wakes the worker's event sequencer at once
 * instead of at its next look (worker/events/sequencer.ts). Sent by whoever commits brand-subscribe
 * events: the API after a write that may have assigned brands, the worker after a merge batch.
 *
 * Why: on a Citus cluster each look for unplaced events is a query over all 32 shards, and so is the
 * relay's look for due endpoints; at 200 ms each they cost an idle cluster about 70 ms of CPU a
 * second, and a busy one twice that (bench/findings/2026-11-29-worker-looks-woken.md). Woken, they look rarely.
 *
 * Only a hint: nothing is lost without it. A hint lost (Redis away, a process killed between its
 * commit and the hint) leaves the events to the sequencer's next look, at most
 * SEQUENCE_UNHINTED_MS (worker/index.ts) later. PostgreSQL holds every state, as before.
 */
export const EVENTS_COMMITTED_CHANNEL = 'contacts:events-committed';

/** A connection that fails fast while Redis is away (as src/imports/api-load.ts's). */
function hintConnection(redisUrl: string): Redis {
  const redis = new IORedis(redisUrl, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
  redis.on('error', () => {}); // reconnects by itself; a hint meanwhile is dropped
  return redis;
}

/** Sends the hint; hints made while one is on its way go as one more after it. */
export class EventsCommittedHint {
  private readonly redis: Redis;
  private sending = false;
  private again = false;

  constructor(redisUrl: string) {
    this.redis = hintConnection(redisUrl);
  }

  /** Call after the commit: a hint before it could wake the sequencer too early to see the events. */
  committed(): void {
    if (this.sending) {
      this.again = true;
      return;
    }
    this.sending = true;
    this.redis
      .publish(EVENTS_COMMITTED_CHANNEL, '1')
      .catch(() => {})
      .finally(() => {
        this.sending = false;
        if (this.again) {
          this.again = false;
          this.committed();
        }
      });
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

/**
 * Calls `wake` on every hint, on a subscriber connection of its own (ioredis subscribes again after
 * a reconnect). `ready` settles once the first subscription is made (or failed: hints are optional).
 */
export function onEventsCommitted(
  redisUrl: string,
  wake: () => void,
): { ready: Promise<void>; close(): Promise<void> } {
  const redis = new IORedis(redisUrl, { maxRetriesPerRequest: null });
  redis.on('error', () => {});
  redis.on('message', (channel: string) => {
    if (channel === EVENTS_COMMITTED_CHANNEL) wake();
  });
  const ready = redis.subscribe(EVENTS_COMMITTED_CHANNEL).then(
    () => {},
    () => {},
  );
  return {
    ready,
    async close() {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

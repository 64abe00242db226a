import { isSuspended, suspendedSql } from '../../src/auth/suspension';
import type { Sql } from '../../src/db';
import { after, before, lostToRetention, type Cursor } from '../../src/events/cursor';
import { readPage } from '../../src/events/page';
import { errorFields, log } from '../../src/log';
import { webhookDeliveries } from '../../src/metrics/webhooks';
import { DISABLE_AFTER_DAYS, retryDelayMs } from './backoff';
import { runLoop, type Loop } from './loop';
import { sendAttempt, type CheckUrl, type Sent } from './send';

/** Events in one delivery at most (the contract's 1 to 1000). */
export const BATCH_EVENTS = 1_000;

/**
 * While an import runs in this process, each batch is followed by a rest of this many times its own
 * time: the relay then takes about a tenth of what it would, and the import keeps its cores (a
 * relay at full speed beside a 1M-row import slowed it 10 %, bench/README.md's events step). The
 * events wait, not lost: once the import ends the relay runs at full speed again.
 */
const IMPORT_PACE = 9;

export interface RelayOptions {
  /** WEBHOOK_ALLOW_PRIVATE_URLS: loopback, private and link-local addresses may be delivered to. */
  allowPrivate: boolean;
  /** src/webhooks/url-safety.ts's check, run before every attempt. */
  checkUrl: CheckUrl;
  /** Endpoints this process delivers to at once (8). */
  concurrency?: number;
  /** How long a receiver has to answer (10 s; tests shorten it). */
  timeoutMs?: number;
  /** How often the relay looks for endpoints unasked (200 ms; the worker's: worker/index.ts). */
  pollMs?: number;
  /** How long a claim on an endpoint holds without being renewed (30 s). */
  leaseSeconds?: number;
  /** Whether an import runs in this process now: batches are then paced (IMPORT_PACE). Absent: never. */
  importing?: () => boolean;
}

/** An endpoint row as the claim and every later update return it (by its lease). */
interface Endpoint {
  account_id: string;
  id: string;
  url: string;
  secret: string;
  delivered_position: number;
  delivered_index: number;
  batch_id: string | null;
  batch_position: number | null;
  batch_index: number | null;
  batch_timestamp: Date | null;
  attempts: number;
}

/** What one step left: go on with the next batch, stop (nothing due or it failed), or the lease is gone. */
type Step = 'more' | 'done' | 'lost';

export interface Relay {
  /** Looks for endpoints to deliver now, not at the next poll. */
  poke(): void;
  /** Starts no more attempts; resolves once the running ones ended and their leases are released. */
  stop(): Promise<void>;
}

/**
 * Pushes each account's feed to its webhook endpoints (docs/events-and-webhooks.md), in every
 * worker process. An endpoint is delivered by one process at a time, under a lease on its row: a
 * process that dies mid-delivery loses it after `leaseSeconds`, and whoever claims it next resends
 * the batch in flight unchanged (same webhook-id, same events, same body timestamp), since the
 * batch is fixed in the row before its first attempt. No Redis: PostgreSQL holds every state.
 *
 * Every statement names its account, except the search for due endpoints: a plain SELECT joining
 * on account_id, which Citus runs on every node (tables distributed by account_id).
 */
export function startRelay(sql: Sql, options: RelayOptions): Relay {
  const concurrency = options.concurrency ?? 8;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const leaseSeconds = options.leaseSeconds ?? 30;
  // One token per process: a process that lost its connection mid-delivery claims its own leases
  // again at once; `delivering` keeps it from delivering an endpoint twice at the same time.
  const token = crypto.randomUUID();
  const delivering = new Map<string, Promise<void>>();
  const retryTimers = new Set<ReturnType<typeof setTimeout>>();
  let stopping = false;
  let failing = false;

  // A fragment is built afresh for each statement that holds or renews the lease.
  const lease = () => sql`now() + make_interval(secs => ${leaseSeconds})`;

  async function pass(): Promise<boolean> {
    const free = concurrency - delivering.size;
    if (free <= 0 || stopping) return false;
    // Due, not leased by another process, and with a batch in flight or events past the cursor. A
    // suspended account's endpoints wait, untouched: their events stay in the feed, and the first
    // pass after the account is unsuspended finds them (accounts: a reference table on a cluster).
    const due = await sql<{ account_id: string; id: string }[]>`
      select e.account_id, e.id
      from webhook_endpoints e
      join event_feed_heads h on h.account_id = e.account_id
      join accounts a on a.id = e.account_id
      where e.enabled and e.next_attempt_at <= now() and not ${suspendedSql(sql, 'a')}
        and (e.lease_until is null or e.lease_until < now() or e.lease_token = ${token})
        and (e.batch_id is not null or h.sequenced_through >= e.delivered_position)
      order by e.next_attempt_at
      limit ${free + delivering.size}`;
    for (const { account_id, id } of due) {
      const key = `${account_id}/${id}`;
      if (delivering.has(key) || delivering.size >= concurrency) continue;
      delivering.set(
        key,
        deliver(account_id, id).finally(() => {
          delivering.delete(key);
          loop.poke();
        }),
      );
    }
    return false;
  }

  /** Claims the endpoint and delivers its batches one after another while they succeed. */
  async function deliver(accountId: string, id: string): Promise<void> {
    let held = false;
    try {
      let [ep] = await sql<Endpoint[]>`
        update webhook_endpoints set lease_token = ${token}, lease_until = ${lease()}
        where account_id = ${accountId} and id = ${id} and enabled and next_attempt_at <= now()
          and (lease_until is null or lease_until < now() or lease_token = ${token})
        returning *`;
      held = ep !== undefined;
      let step: Step = 'more';
      while (ep && step === 'more' && !stopping) {
        // Suspended while its backlog goes out: the next batch waits (as it is, if fixed) until unsuspended.
        if (await isSuspended(sql, accountId)) break;
        const started = performance.now();
        [step, ep] = await deliverBatch(ep);
        // Capped well inside the lease, which the next batch's first update renews.
        if (step === 'more' && options.importing?.())
          await Bun.sleep(Math.min((performance.now() - started) * IMPORT_PACE, (leaseSeconds * 1000) / 3));
      }
      if (step === 'lost') held = false;
      if (failing) log('info', 'webhook relay works again');
      failing = false;
    } catch (e) {
      // PostgreSQL restarting, a connection cut: the lease stays ours and the next pass claims it again.
      if (!failing)
        log('warn', 'webhook delivery stopped by an error; retrying', { accountId, endpointId: id, ...errorFields(e) });
      failing = true;
      held = false;
    }
    if (held)
      await sql`
        update webhook_endpoints set lease_token = null, lease_until = null
        where account_id = ${accountId} and id = ${id} and lease_token = ${token}`.catch(() => {});
  }

  /** One batch: fixed first if none is in flight, then sent once; its result recorded under the lease. */
  async function deliverBatch(ep: Endpoint): Promise<[Step, Endpoint | undefined]> {
    const accountId = ep.account_id;
    const [head] = await sql<{ sequenced_through: number; pruned_through: number }[]>`
      select sequenced_through, pruned_through from event_feed_heads where account_id = ${accountId}`;
    let cursor: Cursor = { position: Number(ep.delivered_position), index: ep.delivered_index };
    const prunedThrough = Number(head?.pruned_through ?? 0);
    if (lostToRetention(cursor, prunedThrough)) {
      const oldest = after(prunedThrough);
      log('warn', 'webhook endpoint fell behind the retention; its events before it are not delivered', {
        accountId,
        endpointId: ep.id,
        from: cursor.position,
        to: oldest.position,
      });
      cursor = oldest;
    }
    if (ep.batch_id === null) {
      const page = await readPage(sql, accountId, cursor, BATCH_EVENTS);
      if (page.count === 0) {
        // Erased contacts' events only (the page moved), or nothing: a gap below the head (sets
        // removed) is passed, since the head was read first and the page saw everything under it.
        const headEnd = after(Number(head?.sequenced_through ?? 0));
        const moved = before(cursor, page.next);
        const to = moved ? page.next : before(cursor, headEnd) ? headEnd : cursor;
        if (to.position === Number(ep.delivered_position) && to.index === ep.delivered_index) return ['done', ep];
        const next = await update(ep, sql`delivered_position = ${to.position}, delivered_index = ${to.index}`);
        if (!next) return ['lost', undefined];
        return [moved ? 'more' : 'done', next];
      }
      const batchId = `msg_${crypto.randomUUID().replaceAll('-', '')}`;
      const fixed = await update(
        ep,
        sql`delivered_position = ${cursor.position}, delivered_index = ${cursor.index},
          batch_id = ${batchId}, batch_position = ${page.next.position}, batch_index = ${page.next.index},
          batch_timestamp = now()`,
      );
      if (!fixed) return ['lost', undefined];
      return attempt(fixed, page.events);
    }
    const end: Cursor = { position: Number(ep.batch_position), index: ep.batch_index! };
    const page = before(cursor, end) ? await readPage(sql, accountId, cursor, BATCH_EVENTS, end) : undefined;
    if (!page?.count) {
      // Every event of the batch was erased or fell out of the retention since its first attempt.
      const done = await succeeded(ep, before(cursor, end) ? end : cursor);
      return done ? ['more', done] : ['lost', undefined];
    }
    const renewed = await update(ep, sql`delivered_position = ${cursor.position}, delivered_index = ${cursor.index}`);
    if (!renewed) return ['lost', undefined];
    return attempt(renewed, page.events);
  }

  async function attempt(ep: Endpoint, events: string): Promise<[Step, Endpoint | undefined]> {
    // The events' JSON text spliced in as the page read it: no parse, no second serialisation.
    const timestamp = JSON.stringify(ep.batch_timestamp!.toISOString());
    const body = `{"type":"events","timestamp":${timestamp},"data":[${events}]}`;
    const sent = await sendAttempt(
      { url: ep.url, secret: ep.secret, id: ep.batch_id!, body },
      { timeoutMs, allowPrivate: options.allowPrivate, checkUrl: options.checkUrl },
    );
    webhookDeliveries.inc({ outcome: sent.outcome });
    if (sent.outcome === 'success') {
      const done = await succeeded(ep, { position: Number(ep.batch_position), index: ep.batch_index! });
      return done ? ['more', done] : ['lost', undefined];
    }
    return [(await failed(ep, sent)) ? 'done' : 'lost', undefined];
  }

  /** The batch delivered: the cursor moves to its end, and the endpoint is well again. */
  function succeeded(ep: Endpoint, end: Cursor): Promise<Endpoint | undefined> {
    return update(
      ep,
      sql`delivered_position = ${end.position}, delivered_index = ${end.index},
        batch_id = null, batch_position = null, batch_index = null, batch_timestamp = null,
        attempts = 0, failing_since = null, last_success_at = now(), next_attempt_at = now()`,
    );
  }

  /**
   * The attempt failed: the batch waits for its retry (the lease released with it), or, when every
   * delivery has failed for DISABLE_AFTER_DAYS, the endpoint is disabled with the reason.
   */
  async function failed(ep: Endpoint, sent: Sent): Promise<boolean> {
    const reason = sent.reason ?? sent.outcome;
    const delayMs = retryDelayMs(ep.attempts + 1);
    // Decided before the update, not in it: Citus refuses now() inside an UPDATE's CASE or
    // COALESCE. The lease makes the row ours, so nothing changes it in between.
    const [since] = await sql<{ expired: boolean | null }[]>`
      select failing_since < now() - make_interval(days => ${DISABLE_AFTER_DAYS}) as expired
      from webhook_endpoints where account_id = ${ep.account_id} and id = ${ep.id}`;
    const expired = since?.expired === true;
    const disabledReason = `every delivery failed for ${DISABLE_AFTER_DAYS} days; last error: ${reason}`;
    const [row] = await sql<{ enabled: boolean; attempts: number }[]>`
      update webhook_endpoints set
        attempts = attempts + 1, last_failure_at = now(), last_failure_reason = ${reason},
        failing_since = ${since?.expired === null ? sql`now()` : sql`failing_since`},
        next_attempt_at = now() + make_interval(secs => ${delayMs / 1000}),
        enabled = ${!expired},
        disabled_reason = ${expired ? disabledReason : null},
        lease_token = null, lease_until = null
      where account_id = ${ep.account_id} and id = ${ep.id} and lease_token = ${token}
      returning enabled, attempts`;
    if (!row) return false;
    if (!row.enabled) log('warn', 'webhook endpoint disabled', { accountId: ep.account_id, endpointId: ep.id, reason });
    else {
      // Looked for again when it is due, not only at the next unhinted pass.
      const timer = setTimeout(() => {
        retryTimers.delete(timer);
        loop.poke();
      }, delayMs + 5);
      timer.unref();
      retryTimers.add(timer);
      log('info', 'webhook delivery failed; retrying', {
        accountId: ep.account_id,
        endpointId: ep.id,
        attempts: row.attempts,
        reason,
        retryInMs: delayMs,
      });
    }
    return true;
  }

  /** `set` on the endpoint while the lease is ours, renewing it; the row after, or undefined when the lease is gone. */
  async function update(ep: Endpoint, set: ReturnType<Sql>): Promise<Endpoint | undefined> {
    const [row] = await sql<Endpoint[]>`
      update webhook_endpoints set ${set}, lease_until = ${lease()}
      where account_id = ${ep.account_id} and id = ${ep.id} and lease_token = ${token}
      returning *`;
    return row;
  }

  const loop: Loop = runLoop('webhook relay', options.pollMs ?? 200, pass);
  return {
    poke: () => loop.poke(),
    async stop() {
      stopping = true;
      for (const timer of retryTimers) clearTimeout(timer);
      await loop.stop();
      await Promise.allSettled(delivering.values());
    },
  };
}

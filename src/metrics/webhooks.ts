import { Counter, Gauge, type Registry } from 'prom-client';
import type { Sql } from '../db';
import { PREFIX } from './registry';
import { scrapeSource } from './scrape';

/*
 * The webhook relay (worker/events/relay.ts): its attempts counted where it makes them, and how far
 * the endpoints are behind their feeds, read from PostgreSQL at scrape time.
 */

const OUTCOMES = ['success', 'http_error', 'timeout', 'network_error', 'refused_address', 'redirect'] as const;
/** How a delivery attempt ended. */
export type Outcome = (typeof OUTCOMES)[number];
const STATES = ['enabled', 'failing', 'disabled'] as const;

export const webhookDeliveries = new Counter({
  name: `${PREFIX}webhook_deliveries_total`,
  help:
    'Webhook delivery attempts this worker made, by outcome: success (a 2xx), http_error (another status), timeout, ' +
    'network_error (no answer: refused, reset, unknown host), refused_address (the URL resolves to an address not ' +
    'allowed), redirect (3xx, not followed).',
  labelNames: ['outcome'],
  registers: [],
});

/**
 * Events pending and the age of the oldest one, per endpoint, summed (events) and maxed (seconds)
 * per state. A set at the cursor's own position counts the events after the cursor's index (an
 * erased address counts until the relay passes it); sizes are stored, the arrays never read. One
 * multi-shard SELECT: the per-endpoint part groups by account_id, so Citus runs it on each node;
 * only the three states' rows come back.
 */
const LAG_SQL = `
  select state, sum(pending)::int8 as events,
         coalesce(max(extract(epoch from now() - oldest)), 0)::float8 as seconds
  from (
    select
      case when not enabled then 'disabled' when failing_since is not null then 'failing' else 'enabled' end as state,
      sum(pending) as pending,
      min(created_at) filter (where pending > 0) as oldest
    from (
      select e.account_id, e.id, e.enabled, e.failing_since, s.created_at,
        case
          when s.position is null then 0
          when s.position > e.delivered_position then s.size
          else greatest(s.size - e.delivered_index, 0)
        end as pending
      from webhook_endpoints e
      left join brand_subscribe_events s
        on s.account_id = e.account_id and s.position is not null and s.position >= e.delivered_position
    ) sets
    group by account_id, id, enabled, failing_since
  ) endpoints
  group by state`;

/**
 * Registers the relay's counter (every outcome shown from 0) and the lag gauges in the worker's
 * registry. The gauges' figures are the database's, the same in every worker: aggregate with max.
 */
export function registerWebhookMetrics(registry: Registry, sql: Sql): void {
  registry.registerMetric(webhookDeliveries);
  for (const outcome of OUTCOMES) webhookDeliveries.inc({ outcome }, 0);
  const read = scrapeSource('webhook delivery lag', () =>
    sql.unsafe<{ state: string; events: number; seconds: number }[]>(LAG_SQL),
  );
  const gauge = (name: string, help: string, pick: (r: { events: number; seconds: number }) => number) =>
    new Gauge({
      name: `${PREFIX}${name}`,
      help,
      labelNames: ['state'],
      registers: [registry],
      async collect() {
        this.reset();
        // Both gauges collect at once in a scrape, and share this one read (scrapeSource).
        const rows = await read();
        if (!rows) return;
        for (const state of STATES) {
          const row = rows.find((r) => r.state === state);
          this.set({ state }, row ? pick({ events: Number(row.events), seconds: Number(row.seconds) }) : 0);
        }
      },
    });
  gauge(
    'webhook_delivery_lag_events',
    'Brand-subscribe events in the feed not yet delivered to webhook endpoints (the batch in flight included), ' +
      'summed over the endpoints in each state: enabled, failing (enabled, its last attempts failed), disabled.',
    (r) => r.events,
  );
  gauge(
    'webhook_delivery_lag_seconds',
    'Age of the oldest brand-subscribe event not yet delivered to a webhook endpoint, the largest over the ' +
      'endpoints in each state (enabled, failing, disabled); 0 when none is pending.',
    (r) => r.seconds,
  );
}

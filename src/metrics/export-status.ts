import { Gauge, type Registry } from 'prom-client';
import type { Sql } from '../db';
import { PREFIX } from './registry';
import { scrapeSource } from './scrape';

const OPEN = ['queued', 'exporting'] as const;
const FINAL = ['success', 'failed'] as const;

/**
 * Contact exports by status, read from contact_exports at scrape time like the imports' gauge
 * (import-status.ts): the open ones from the partial index contact_exports_one_open, the final ones
 * among exports created in the last 24 hours, account by account through the primary key. Every
 * status has a sample, 0 when none. A rising `failed` is what the ExportsFailing alert watches.
 */
export function exportStatusGauge(registry: Registry, sql: Sql): void {
  const read = scrapeSource(
    'contact_exports by status',
    () =>
      sql<{ status: string; n: number }[]>`
      select status, count(*)::int as n from contact_exports
      where status in ('queued', 'exporting')
      group by status
      union all
      select recent.status, count(*)::int from accounts a
      cross join lateral (
        select e.status from contact_exports e
        where e.account_id = a.id and e.created_at > now() - interval '24 hours' and e.status in ('success', 'failed')
      ) recent
      group by recent.status`,
  );
  new Gauge({
    name: `${PREFIX}exports`,
    help:
      'Contact exports by status: every open one (queued, exporting), and the success and failed ones among ' +
      'exports created in the last 24 hours.',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      this.reset();
      const rows = await read();
      if (!rows) return;
      for (const status of [...OPEN, ...FINAL]) this.set({ status }, 0);
      for (const r of rows) this.set({ status: r.status }, r.n);
    },
  });
}

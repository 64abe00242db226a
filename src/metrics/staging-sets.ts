import { Gauge, type Registry } from 'prom-client';
import type { Sql } from '../db';
import { PREFIX } from './registry';
import { scrapeSource } from './scrape';

/**
 * The staging pool of a Citus cluster (worker/import/staging-pool.ts, table staging_sets): sets ready
 * and free, and sets an import holds. An import that finds none free makes its own at the old cost
 * (about a second per table), so `free` at 0 while imports hold sets is the pool exhausted. On a
 * single PostgreSQL the pool is not used and both read 0.
 */
export function stagingSetsGauge(registry: Registry, sql: Sql): void {
  const read = scrapeSource(
    'staging_sets',
    () =>
      sql<{ free: number; claimed: number }[]>`
      select count(*) filter (where import_id is null and ready)::int as free,
             count(*) filter (where import_id is not null)::int as claimed
      from staging_sets`,
  );
  new Gauge({
    name: `${PREFIX}staging_sets`,
    help: "The Citus staging pool's sets: free (ready, held by no import) and claimed (held by an import).",
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      this.reset();
      const [row] = (await read()) ?? [];
      if (!row) return;
      this.set({ state: 'free' }, row.free);
      this.set({ state: 'claimed' }, row.claimed);
    },
  });
}

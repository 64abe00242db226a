import { Gauge, type Registry } from 'prom-client';
import { poolUsage } from '../db';
import { PREFIX } from './registry';

/**
 * The process's PostgreSQL pool: its size, and the connections in use and the demand beyond them as
 * counted by src/db/pool-usage.ts (no database round trip).
 */
export function poolGauges(registry: Registry, sql: object): void {
  const usage = poolUsage(sql);
  if (!usage) return;
  new Gauge({
    name: `${PREFIX}db_pool_size`,
    help: "Connections this process's PostgreSQL pool may open (DATABASE_POOL_SIZE, or the worker's raised size).",
    registers: [registry],
    collect() {
      this.set(usage.size);
    },
  });
  new Gauge({
    name: `${PREFIX}db_pool_connections_in_use`,
    help:
      "Connections of this process's pool held right now: by a reservation, an open transaction or a statement " +
      'under way (at most the pool size).',
    registers: [registry],
    collect() {
      this.set(Math.min(usage.held, usage.size));
    },
  });
  new Gauge({
    name: `${PREFIX}db_pool_waiting`,
    help:
      'Reservations, transactions and statements of this process beyond the pool size: waiting for a connection ' +
      '(or pipelined behind another statement on one).',
    registers: [registry],
    collect() {
      this.set(Math.max(0, usage.held - usage.size));
    },
  });
}

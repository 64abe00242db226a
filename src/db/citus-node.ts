import type { Sql } from './pool';

/**
 * True when `sql` is connected to a worker node of a Citus cluster, rather than to its coordinator
 * or to a PostgreSQL without Citus. API replicas may connect to any node (docs/scaling-out.md); what
 * needs the coordinator (migrations, the worker process's staging DDL and its own locks) asks this.
 */
export async function onCitusWorkerNode(sql: Sql): Promise<boolean> {
  const [citus] = await sql`select 1 from pg_extension where extname = 'citus'`;
  if (!citus) return false;
  const [node] = await sql<{ coordinator: boolean }[]>`select citus_is_coordinator() as coordinator`;
  return !node!.coordinator;
}

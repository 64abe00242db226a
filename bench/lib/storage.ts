/**
 * Where the contacts are and what they take on disk: the whole table with its indexes and TOAST on
 * one PostgreSQL, and per node on a Citus cluster (citus_shards). Bytes per contact is the input of
 * the scale model's "what N nodes hold" (bench/findings/2026-11-29-scale-out-model.md).
 */
import type { Sql } from '../../src/db';

export interface ContactStorage {
  contacts: number;
  bytes: number;
  /** per Citus worker node: its contacts' shards (none on one PostgreSQL) */
  nodes: { node: string; shards: number; contacts: number; bytes: number }[];
}

export async function contactStorage(sql: Sql): Promise<ContactStorage> {
  const [{ n } = { n: 0 }] = await sql<{ n: number }[]>`select count(*)::float8 as n from contacts`;
  const [citus] = await sql`select 1 from pg_extension where extname = 'citus'`;
  if (!citus) {
    const [{ b } = { b: 0 }] = await sql<{ b: number }[]>`select pg_total_relation_size('contacts')::float8 as b`;
    return { contacts: n, bytes: b, nodes: [] };
  }
  // citus_shards' shard_size is the shard's total relation size (heap, indexes, TOAST) on its node.
  const sizes = await sql<{ node: string; shards: number; bytes: number }[]>`
    select nodename || ':' || nodeport as node, count(*)::int as shards, sum(shard_size)::float8 as bytes
    from citus_shards where table_name = 'contacts'::regclass
    group by nodename, nodeport order by nodeport`;
  // Rows per node: a count per shard, run on the node that holds it.
  const counts = await sql<{ node: string; contacts: number }[]>`
    select s.nodename || ':' || s.nodeport as node, sum(r.result::bigint)::float8 as contacts
    from run_command_on_shards('contacts', $$select count(*) from %s$$) r
    join citus_shards s on s.shardid = r.shardid
    group by s.nodename, s.nodeport`;
  const nodes = sizes.map((s) => ({ ...s, contacts: counts.find((c) => c.node === s.node)?.contacts ?? 0 }));
  return { contacts: n, bytes: nodes.reduce((a, s) => a + s.bytes, 0), nodes };
}

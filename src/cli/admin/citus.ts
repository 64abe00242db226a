import type { Sql } from '../../db';
import { AdminError, type Command, parseFlags } from './args';

/** One table as Citus holds it: hash-distributed (`h`, by account_id) or a reference table (`n`). */
interface Placement {
  table: string;
  method: string;
  colocationId: number;
}

/**
 * `citus distribute`: a database migrated on one PostgreSQL that got Citus later (the extension
 * created, the workers added with citus_add_node) gets its tables distributed in place, with their
 * rows, as migration 0007 does on a cluster from the start (distribute_tables). Refused while an
 * import runs: its staging tables were made on one node and its merge would read them there.
 * Idempotent: a table already distributed is left as it is. Prints each table's placement.
 */
async function distribute(sql: Sql): Promise<{ workers: number; tables: Placement[] }> {
  const [citus] = await sql`select 1 from pg_extension where extname = 'citus'`;
  if (!citus) {
    throw new AdminError(
      'the citus extension is not installed in this database: install Citus on every node, run ' +
        '`create extension citus` on each, add the workers on this one with citus_add_node, then run this again',
    );
  }
  const [nodes] = await sql<{ workers: number }[]>`
    select count(*)::int as workers from pg_dist_node where noderole = 'primary' and groupid <> 0 and isactive`;
  if (nodes!.workers === 0) {
    throw new AdminError('this Citus coordinator has no workers: add them with citus_add_node, then run this again');
  }
  const running = await sql<{ id: string }[]>`
    select id from contact_imports where status = 'importing' limit 5`;
  if (running.length) {
    throw new AdminError(
      `contact imports are running (${running.map((r) => r.id).join(', ')}): ` +
        'stop the workers or wait for them to finish, then run this again',
    );
  }
  await sql`select distribute_tables()`;
  const tables = await sql<Placement[]>`
    select logicalrelid::text as table, partmethod as method, colocationid as "colocationId"
    from pg_dist_partition order by logicalrelid::text`;
  return { workers: nodes!.workers, tables };
}

export const citusCommands: Record<string, Command> = {
  'citus distribute': {
    usage: 'citus distribute',
    prepare(argv) {
      parseFlags(argv, {});
      return (sql) => distribute(sql);
    },
  },
};

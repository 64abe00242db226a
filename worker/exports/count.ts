import type { Sql } from '../../src/db';
import { whereClause, type ExportFilter } from './select';

/**
 * The rows an export will write (its percentComplete's denominator), counted by one backend without
 * JIT. Planned freely, the count of a 25M-contact account was a parallel scan of its 22 GB of heap by
 * three processes, compiled first, beside the COPY's own backend: on two cores another account's GETs
 * waited up to 480 ms in the export's first seconds (bench step `export`,
 * bench/findings/2026-11-28-export-25m-get-tail.md).
 * A progress figure is not worth that. `set local`: the pool's connection keeps its settings.
 */
export async function countRows(sql: Sql, accountId: string, filter: ExportFilter): Promise<number> {
  return sql.begin(async (tx) => {
    await tx`set local max_parallel_workers_per_gather = 0`;
    await tx`set local jit = off`;
    const [r] = await tx.unsafe<{ n: string }[]>(
      `select count(*) as n from contacts c where ${whereClause(accountId, filter)}`,
    );
    return Number(r!.n);
  });
}

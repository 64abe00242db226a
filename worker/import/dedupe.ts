import { stagingTables } from './staging';
import type { Pipeline } from './state';

/** The raw staged rows did not survive (a PostgreSQL crash empties unlogged tables): read again. */
export class StagingLostError extends Error {}

/**
 * Phase 2, dedupe: keep the last row per email (highest row_no), set-based, into the merge table
 * with a dense `seq` so merge batches are ranges of it. Everything happens in ONE transaction
 * (PostgreSQL DDL is transactional): the merge table, the counts, the move to `merge` and the drop
 * of the raw rows commit together or not at all, so a crash anywhere here just reruns it.
 *
 * `seq` follows email_md5 order rather than file order. The result is the same (one row per
 * email, no order between emails matters), but it costs one sort instead of two (DISTINCT ON
 * already sorts by email_md5) and each merge batch then covers one narrow key range of the
 * contacts primary key, which keeps the index pages a batch touches hot.
 */
export async function dedupePhase(p: Pipeline): Promise<void> {
  const { job } = p;
  const t = stagingTables(job.id);
  const counts = await dedupe(p, t).catch(async (e) => {
    if (!(e instanceof StagingLostError)) throw e;
    await p.sql`
      update contact_imports set phase = 'read', updated_at = now()
      where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid and status = 'importing' and phase = 'dedupe'`;
    job.phase = 'read';
    p.log('import staging lost; reading the file again', { importId: job.id });
    throw e; // transient: the retry runs the read phase again
  });
  job.phase = 'merge';
  job.rowCount = counts.kept;
  job.checkpoint = 0;
  p.log('import deduplicated', { importId: job.id, rowCount: counts.kept, duplicateInFile: counts.staged - counts.kept });
}

async function dedupe(p: Pipeline, t: ReturnType<typeof stagingTables>): Promise<{ staged: number; kept: number }> {
  const { job } = p;
  return p.sql.begin(async (tx) => {
    // The sort of every staged row (wide: attributes and brands ride along) is the whole cost of
    // this phase. With the server's 64 MB it spills to disk from ~200,000 rows on; 1 GB sorts a
    // 1M-row file in memory and cuts the merge passes of a 25M-row one (measured: 3M rows 11.5 s →
    // 8.9 s). Only for this transaction, one per running import (WORKER_CONCURRENCY, default 1).
    await tx`set local work_mem = '1GB'`;
    const [staging] = await tx<{ staged_count: number | null }[]>`
      select staged_count from contact_imports where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid`;
    const [present] = await tx.unsafe<{ n: number }[]>(`select count(*)::int8 as n from ${t.rows}`);
    if (Number(present!.n) !== Number(staging?.staged_count ?? -1)) throw new StagingLostError(`staged rows of import ${job.id} were lost`);
    await tx.unsafe(`drop table if exists ${t.merge}`);
    // Logged, unlike the raw staging table: it must survive a PostgreSQL crash for as long as the
    // merge checkpoint that indexes into it. Created in this transaction, it skips WAL under
    // wal_level=minimal (the embedded default) and costs one WAL copy of the deduplicated rows elsewhere.
    await tx.unsafe(`
      create table ${t.merge} as
      select row_number() over (order by email_md5) as seq, email_md5, email, attributes, brand_ids
      from (
        select distinct on (email_md5) email_md5, email, attributes, brand_ids
        from ${t.rows}
        order by email_md5, row_no desc
      ) last_per_email`);
    await tx.unsafe(`alter table ${t.merge} add primary key (seq)`);
    // Real statistics, so the merge plans its joins for batches of this size, not for a guess.
    await tx.unsafe(`analyze ${t.merge}`);
    const [c] = await tx.unsafe<{ staged: number; kept: number }[]>(`
      select (select count(*) from ${t.rows})::int8 as staged, (select count(*) from ${t.merge})::int8 as kept`);
    const staged = Number(c!.staged);
    const kept = Number(c!.kept);
    await tx`
      update contact_imports
      set row_count = ${kept}, duplicate_in_file_count = ${staged - kept},
          added_count = 0, updated_count = 0, skipped_count = 0,
          checkpoint = 0, percent_complete = 0, phase = 'merge', updated_at = now()
      where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid and status = 'importing' and phase = 'dedupe'`;
    await tx.unsafe(`drop table ${t.rows}`);
    return { staged, kept };
  });
}

import { Pacer } from './pace';
import { recordDuplicates } from './rejects';
import { discardTables, hasRows } from './staging';
import { StagingLostError } from './errors';
import { type Pipeline } from './state';

/**
 * The duplicate rows of the rejected-rows report, recorded while the merge runs (merge.ts starts
 * this beside its batches; the report's draft waits for it), after which the staged rows it scans
 * are dropped. Beside the dedupe's parts, which keep both cores busy, the scan added 0.2 s to a
 * 1M-row file's import; the merge's backends leave room (they wait on the worker between
 * statements). Like the batches it gives the API room while the API is busy (pace.ts). The dedupe
 * phase keeps the staged rows for it when it dropped rows and the report is on.
 *
 * Whether a run recorded them is derived, not stored: the import's duplicateInFileCount (committed
 * by the dedupe) against the `duplicate_in_file` rows of its rejects. recordDuplicates writes them
 * all in one commit, so the two are equal exactly when the scan is done, and a run killed before
 * that scans again from the kept rows. A read that starts over forgets them (forgetRead) and the
 * dedupe after it keeps the rows again. Returns how many rows were recorded by this call.
 */
export async function recordDuplicatesOnce(p: Pipeline): Promise<number> {
  const { sql, job } = p;
  const t = p.staging.tables;
  const [row] = await sql<{ recorded: boolean; duplicates: string | null; staged: string | null }[]>`
    select rejects_recorded as recorded, duplicate_in_file_count as duplicates, staged_count as staged
    from contact_imports where account_id = ${job.accountId}::uuid and id = ${job.id}::uuid`;
  const expected = Number(row?.duplicates ?? 0);
  let written = 0;
  if (row?.recorded && expected > 0 && (await recorded(p, t.rejects)) !== expected) {
    // Let go only after the scan's commit (dropped, or emptied in a pool): missing or empty rows
    // here are a PostgreSQL crash (see ensureStaged).
    const [present] = await sql<{ kept: boolean }[]>`select to_regclass(${t.rows}) is not null as kept`;
    if (!present?.kept || !(await hasRows(sql, t.rows, job.accountId))) {
      throw new StagingLostError(`the staged rows of import ${job.id} were lost before its duplicate rows were found`);
    }
    const started = performance.now();
    const pacer = new Pacer(p);
    written = await recordDuplicates(sql, p.staging, job.accountId, pacer);
    if (written !== expected)
      throw new Error(`import ${job.id}: ${written} duplicate rows found, but dedupe dropped ${expected}`);
    // Paced (the API was busy): how many pieces, and how long the scan rested between them.
    const paced = pacer.pieces > 0 ? { pacedPieces: pacer.pieces, restedMs: pacer.restedMs } : {};
    p.log('import duplicate rows recorded', {
      importId: job.id,
      rows: written,
      ms: Math.round(performance.now() - started),
      ...paced,
    });
  }
  await discardTables(sql, p.staging, [t.rows, t.repeatRows], row?.staged == null ? undefined : Number(row.staged));
  return written;
}

async function recorded(p: Pipeline, rejects: string): Promise<number> {
  const [r] = await p.sql.unsafe<{ n: string }[]>(
    `select count(*) as n from ${rejects} where account_id = $1::uuid and reason = 'duplicate_in_file'`,
    [p.job.accountId],
  );
  return Number(r!.n);
}

import { suspendedSql } from '../../src/auth/suspension';
import type { Sql } from '../../src/db';
import { EXPORT_LEASE_SECONDS } from '../../src/exports/retry-after';
import { log } from '../../src/log';
import type { ObjectStore } from '../../src/storage/store';
import { runLoop, type Loop } from '../events/loop';
import { runExport, type ClaimedExport, type RunEnd } from './run';

export interface ExportLoopOptions {
  /** EXPORT_RETENTION_DAYS */
  retentionDays: number;
  /** How often the loop looks for an export to run (1 s). */
  pollMs?: number;
  /** Whether the API is busy now (src/imports/api-load.ts): a COPY then reads at a lower rate. */
  apiBusy?: () => boolean;
}

/**
 * Runs contact exports in every worker process, one at a time per process (a COPY keeps one
 * connection and one PostgreSQL core busy; worker/pool-size.ts counts its connections). No Redis:
 * the export row is the job (runNextExport).
 */
export function startExports(sql: Sql, storage: ObjectStore, options: ExportLoopOptions): Loop {
  const token = crypto.randomUUID();
  return runLoop('contact exports', options.pollMs ?? 1_000, async () => {
    // One run per pass; after one, look again at once for the next.
    return (await runNextExport(sql, storage, token, options.retentionDays, options.apiBusy)) !== undefined;
  });
}

/**
 * Claims one export and runs it: a queued one, or one whose lease lapsed because its worker died,
 * claimed by a conditional update on its row, a statement Citus routes to the account's node (the
 * search before it is a plain SELECT over every node). Two processes may find the same row; only
 * one update matches. Undefined when there was nothing to run.
 */
export async function runNextExport(
  sql: Sql,
  storage: ObjectStore,
  token: string,
  retentionDays: number,
  apiBusy?: () => boolean,
): Promise<RunEnd | undefined> {
  // A suspended account's exports wait, queued, until it is unsuspended (runExport puts back one
  // that was running); in the search, so that they never crowd out the others' (accounts: a
  // reference table on a cluster).
  const due = await sql<{ account_id: string; id: string }[]>`
    select x.account_id, x.id from contact_exports x
    join accounts a on a.id = x.account_id
    where (x.status = 'queued' or (x.status = 'exporting' and x.lease_until < now())) and not ${suspendedSql(sql, 'a')}
    order by x.created_at
    limit 10`;
  for (const { account_id, id } of due) {
    const [claimed] = await sql<ClaimedExport[]>`
      update contact_exports
      set status = 'exporting', lease_token = ${token},
        lease_until = now() + make_interval(secs => ${EXPORT_LEASE_SECONDS}),
        attempts = attempts + 1, started_at = now(), rows_written = 0, rows_expected = null
      where account_id = ${account_id} and id = ${id}
        and (status = 'queued' or (status = 'exporting' and lease_until < now()))
      returning account_id, id, columns, brand_ids::text[] as brand_ids, enabled, search_filter, compression, attempts,
        object_key, upload_id`;
    if (!claimed) continue;
    if (claimed.attempts > 1) log('info', 'contact export taken up again', { exportId: id, attempt: claimed.attempts });
    return runExport({ sql, storage, token, retentionDays, apiBusy, log: (msg, f) => log('info', msg, f) }, claimed);
  }
  return undefined;
}

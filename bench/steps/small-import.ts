/**
 * Imports of a few rows through the real flow (POST, PUT to the upload link, GET polled), timed
 * from the end of the upload to `success` by the import's `completedAt` (the service's clock on
 * this machine, to the millisecond), each verified: its counts and its account's contacts. The
 * fair step runs 20 of them beside import A; step `small` (runSmall) runs SMALL_RUNS alone, one
 * after another, each into a new account, on the single node and, with --citus, on the cluster.
 */
import type { Sql } from '../../src/db';
import { createBenchAccount, type BenchAccount } from '../lib/account';
import { COLUMNS, rowAt } from '../lib/dataset';
import type { ImportView } from '../lib/import-flow';
import type { Target } from '../lib/types';
import { checkContactCount } from '../lib/verify';

/** Rows of each small import: new contacts of the wide file A's model. */
export const SMALL_ROWS = 10;
/** Imports of step `small`, of which the median counts. */
export const SMALL_RUNS = 5;
/** Issue 40: on the embedded cluster a small import reaches `success` within 2 s of its upload (median). */
export const SMALL_CLUSTER_SECONDS = 2;

type Ctx = { baseUrl: string; sql: Sql };

/** The first SMALL_ROWS normal rows of file A's model: each a new contact of its account. */
export function smallFile(): string {
  const lines = [COLUMNS.join(',')];
  for (let i = 0; lines.length <= SMALL_ROWS; i++) {
    const row = rowAt(i, 0);
    if (row.kind === 'normal') lines.push(row.cells.join(','));
  }
  return `${lines.join('\n')}\n`;
}

/**
 * One small import of `csv` (SMALL_ROWS new contacts) into `account`, verified; seconds from the end
 * of its upload to `success`. Polled every `pollMs`, which does not change the figure (completedAt):
 * a client of this API polls every 5 to 10 s, and 20 clients polling at 10 Hz cost a shared import A
 * more than their imports did.
 */
export async function smallImport(ctx: Ctx, account: BenchAccount, csv: string, pollMs = 1_000): Promise<number> {
  const auth = { authorization: `Bearer ${account.key}` };
  const created = await fetch(`${ctx.baseUrl}/v1/contact-imports`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ columns: COLUMNS, duplicateContactStrategy: 'overwrite' }),
  });
  if (created.status !== 201)
    throw new Error(`small import: create answered ${created.status} ${await created.text()}`);
  const { id, uploadUrl } = (await created.json()) as { id: string; uploadUrl: string };
  const put = await fetch(uploadUrl, { method: 'PUT', headers: { 'content-type': 'text/csv' }, body: csv });
  if (put.status !== 200) throw new Error(`small import: upload answered ${put.status} ${await put.text()}`);
  const uploadedAt = Date.now();
  for (;;) {
    await Bun.sleep(pollMs);
    const got = await fetch(`${ctx.baseUrl}/v1/contact-imports/${id}`, { headers: auth });
    const view = (await got.json()) as ImportView;
    if (view.status === 'success') {
      if (view.addedCount !== SMALL_ROWS || view.malformedCount !== 0 || !view.completedAt)
        throw new Error(`small import: import ${id} ended ${JSON.stringify(view)}`);
      await checkContactCount(ctx.sql, account.id, SMALL_ROWS, 'small import');
      return (Date.parse(view.completedAt) - uploadedAt) / 1000;
    }
    if (view.status === 'failed') throw new Error(`small import: import ${id} failed: ${view.failureReason}`);
    if (Date.now() - uploadedAt > 600_000) throw new Error(`small import: import ${id} not final after 600 s`);
  }
}

export interface SmallRun {
  /** each import's seconds from the end of its upload to `success`, in the order they ran */
  seconds: number[];
  median: number;
}

/** Step `small`: SMALL_RUNS small imports one after another, each into a new account, nothing else running. */
export async function runSmall(ctx: Ctx, label: string, log: (m: string) => void): Promise<SmallRun> {
  const csv = smallFile();
  const seconds: number[] = [];
  for (let k = 0; k < SMALL_RUNS; k++) {
    const account = await createBenchAccount(ctx.sql, `${label} small ${k}`);
    seconds.push(await smallImport(ctx, account, csv, 50));
  }
  const sorted = [...seconds].sort((a, b) => a - b);
  const run = { seconds, median: sorted[Math.floor(sorted.length / 2)]! };
  log(`[bench] ${label}: ${SMALL_RUNS} imports of ${SMALL_ROWS} rows, median ${run.median.toFixed(2)} s (verified)`);
  return run;
}

/** The cluster's small imports against issue 40's target. */
export function smallTargets(cluster: SmallRun | undefined): Target[] {
  if (!cluster) return [];
  return [
    {
      name: 'small import on the cluster, end of upload to success (median)',
      value: `${cluster.median.toFixed(2)} s`,
      target: `<= ${SMALL_CLUSTER_SECONDS} s`,
      pass: cluster.median <= SMALL_CLUSTER_SECONDS,
    },
  ];
}

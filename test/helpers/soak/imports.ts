/**
 * Imports as a client runs them through a bad day: create the import (one open per account, so a
 * 409 means wait), PUT the file to its link, poll until it ends. Every step retries what a fault
 * can cause (no answer, 503); an import created by a request that got no answer would block the
 * account for 24 hours, so one found open and unknown is cancelled (the service's cancel extension).
 */
import { IMPORT_COLUMNS, importFile } from './files';
import { is2xx, type Recorder } from './http';
import type { SoakAccount } from './accounts';
import { rngFor } from './prng';

export interface ImportRun {
  account: number;
  /** The file's number in the account's sequence. */
  file: number;
  id: string;
  /** The import resource as it ended (or as last seen, if it never did). */
  final: Record<string, unknown>;
  /** Orphans of unanswered creates that were cancelled on the way. */
  orphans: number;
  /** ms since the soak's start: the first create sent, the last poll answered */
  start: number;
  end: number;
}

export interface ImportOptions {
  seed: number;
  rows: number;
  /** Gives up an import that has not ended by then (ms since the soak's start). */
  deadline: number;
}

const STEP_TRIES = 200;

export async function runOneImport(
  rec: Recorder,
  base: string,
  acct: SoakAccount,
  source: { account: number; file: number },
  opts: ImportOptions,
): Promise<ImportRun> {
  const csv = importFile(opts.seed, source.account, source.file, opts.rows);
  const start = Date.now() - rec.t0;
  const known = new Set<string>();
  let orphans = 0;
  let created: { id: string; uploadUrl: string } | undefined;
  for (let i = 0; !created && i < STEP_TRIES && !late(rec, opts.deadline); i++) {
    const a = await rec.call<{ id: string; uploadUrl: string }>(acct.index, 'POST', `${base}/v1/contact-imports`, {
      key: acct.key,
      json: { columns: IMPORT_COLUMNS, duplicateContactStrategy: 'overwrite' },
    });
    if (is2xx(a)) created = a.body!;
    else if (a.status === 409) {
      if (await cancelOrphan(rec, base, acct, known)) orphans++;
      else await Bun.sleep(Math.min(2_000, (a.retryAfter ?? 1) * 1000));
    } else await Bun.sleep(500);
  }
  if (!created) return { ...source, id: '', final: { status: 'not created' }, orphans, start, end: start };
  known.add(created.id);

  let uploaded = false;
  for (let i = 0; !uploaded && i < STEP_TRIES && !late(rec, opts.deadline); i++) {
    const put = await rec.call(acct.index, 'PUT', created.uploadUrl, { raw: csv, route: '/uploads/{token}' });
    if (put.status === 200) uploaded = true;
    else if (put.status === 403 && (await statusOf(rec, base, acct, created.id)) !== 'awaiting-upload')
      uploaded = true; // an earlier PUT that got no answer did arrive
    else await Bun.sleep(500);
  }

  let final: Record<string, unknown> = { status: uploaded ? 'unknown' : 'not uploaded' };
  while (uploaded && !late(rec, opts.deadline)) {
    const a = await rec.call(acct.index, 'GET', `${base}/v1/contact-imports/${created.id}`, { key: acct.key });
    if (is2xx(a)) final = a.body as Record<string, unknown>;
    if (final.status === 'success' || final.status === 'failed') break;
    await Bun.sleep(500);
  }
  return { ...source, id: created.id, final, orphans, start, end: Date.now() - rec.t0 };
}

const late = (rec: Recorder, deadline: number) => rec.halted || Date.now() - rec.t0 > deadline;

async function statusOf(rec: Recorder, base: string, acct: SoakAccount, id: string): Promise<string | undefined> {
  const a = await rec.call<{ status: string }>(acct.index, 'GET', `${base}/v1/contact-imports/${id}`, {
    key: acct.key,
  });
  return a.body?.status;
}

/** Cancels an open import this client never got an answer for; true if there was one. */
async function cancelOrphan(rec: Recorder, base: string, acct: SoakAccount, known: Set<string>): Promise<boolean> {
  const list = await rec.call<{ data: { id: string; status: string }[] }>(
    acct.index,
    'GET',
    `${base}/v1/contact-imports?pageSize=10`,
    { key: acct.key },
  );
  const orphan = list.body?.data?.find?.((i) => i.status === 'awaiting-upload' && !known.has(i.id));
  if (!orphan) return false;
  const c = await rec.call(acct.index, 'POST', `${base}/v1/contact-imports/${orphan.id}/cancel`, { key: acct.key });
  return is2xx(c);
}

/**
 * One account's loop: file 0, 1, 2, … one after another until `until` (ms since the soak's start),
 * the last one run to its end, with a seeded pause between files (none in the shape; the CI
 * shape pauses so that its fault-free replay, which takes as long as the imports did, stays short).
 * Each run is pushed to `runs` as it ends.
 */
export async function importLoop(
  rec: Recorder,
  base: string,
  acct: SoakAccount,
  opts: ImportOptions & { until: number; maxFiles: number; pause: [number, number] },
  runs: ImportRun[],
): Promise<void> {
  const rng = rngFor(opts.seed, `imports-${acct.index}`);
  for (let file = 0; file < opts.maxFiles && !late(rec, opts.until); file++) {
    if (file > 0 && opts.pause[1] > 0) await Bun.sleep(rng.int(opts.pause[0], opts.pause[1]));
    runs.push(await runOneImport(rec, base, acct, { account: acct.index, file }, opts));
  }
}

/**
 * Step `dba`: the hand-written peer. What a skilled engineer would do with psql on the same file:
 * COPY it into an UNLOGGED table of text columns, then one INSERT … SELECT DISTINCT ON … ON CONFLICT
 * … DO UPDATE (bench/steps/dba/upsert.sql, or the file shape's own: upsert-narrow.sql) into a fresh
 * account's contacts, its contact tallies recounted after it (dba/recount-tallies.sql); then the same
 * for file B over them. Timed per file from the COPY's start to the upsert's commit. Verified after
 * timing: the upsert wrote one row per distinct good email of the file, and the account holds as many
 * contacts as import A gives (the file's normal rows), its tallies as many.
 *
 * It runs in a database of its own on the embedded PostgreSQL, migrated like the service's and
 * dropped after the step: at 25M rows its contacts after file B take ~45 GB, which the imports that
 * follow need (bench/lib/disk.ts), and a dropped database gives them back at once, where deleting the
 * contacts left the table's pages behind. On a configured database (no databases made there) it runs
 * in that database and deletes its contacts after, so import A and B insert into the same table.
 */
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import type { Sql } from '../../src/db';
import { createBenchAccount, dropAccountContacts } from '../lib/account';
import { cpuDelta, databaseProbes, sampleCpu, type CpuProbe, type CpuSample } from '../lib/cpu';
import type { RunFiles } from '../lib/files';
import type { FileMeta } from '../lib/generate';
import type { Infra } from '../lib/services';
import { shapeOf, type Shape, type ShapeName } from '../lib/shapes';

/** The staging table the upsert reads (its statements name it). */
export const STAGING_TABLE = 'dba_rows';
/**
 * The upsert's transaction, the dba step's and the pgloader step's (pgloader.ts): its settings, then
 * the shape's upsert and the tallies' recount, each with `$1` the account id.
 * - work_mem: the DISTINCT ON's sort in memory, as the import's dedupe;
 * - contact_tallies.explicit: the tallies' per-row UPDATE trigger stays out, the recount keeps them
 *   (dba/recount-tallies.sql); on Citus the setting goes to the shards' transactions too.
 */
export interface UpsertScript {
  settings: string[];
  upsert: string;
  recount: string;
}
export async function upsertScriptOf(shape: Shape): Promise<UpsertScript> {
  const text = (name: string) => Bun.file(new URL(`./dba/${name}`, import.meta.url)).text();
  return {
    settings: [
      `set local work_mem = '1GB'`,
      `set local citus.propagate_set_commands to 'local'`,
      `set local contact_tallies.explicit to on`,
    ],
    upsert: await text(shape.upsertFile),
    recount: await text('recount-tallies.sql'),
  };
}

export interface DbaFileRun {
  file: 'A' | 'B';
  /** COPY start to upsert commit */
  seconds: number;
  copySeconds: number;
  upsertSeconds: number;
  /** contacts the upsert inserted or updated */
  upserted: number;
  /** the PostgreSQL server's CPU seconds (user + system, backends included) in the COPY and in the upsert */
  cpu?: { copy: CpuSample; upsert: CpuSample };
}

export interface DbaRun {
  shape: ShapeName;
  accountId: string;
  a: DbaFileRun;
  b?: DbaFileRun;
}

export async function runDba(
  infra: Infra,
  runId: string,
  files: { a: FileMeta; b?: FileMeta },
  runFiles: RunFiles,
  log: (m: string) => void,
  /** each file's rows, once its upsert has committed (the run's progress line) */
  onFile?: (rows: number) => void,
): Promise<DbaRun> {
  const scratch = await infra.scratch?.('dba');
  const sql = scratch?.sql ?? infra.sql;
  // The same server whichever database: its CPU, for what a row costs the peer against the import.
  const probes = await databaseProbes(infra.databaseUrl);
  const shape = shapeOf(files.a);
  const ctx = { sql, runFiles, probes, log, shape, script: await upsertScriptOf(shape) };
  try {
    const account = await createBenchAccount(sql, `${runId} dba${shape.suffix}`, shape);
    try {
      const a = await loadFile(ctx, account.id, files.a, 'A');
      onFile?.(files.a.rows);
      await expectContacts(sql, account.id, files.a.normal, `after file A${shape.suffix}`);
      const b = files.b ? await loadFile(ctx, account.id, files.b, 'B') : undefined;
      if (files.b) onFile?.(files.b.rows);
      if (files.b) await expectContacts(sql, account.id, files.b.normal, `after file B${shape.suffix}`);
      return { shape: shape.name, accountId: account.id, a, b };
    } finally {
      await sql.unsafe(`drop table if exists ${STAGING_TABLE}`);
      if (!scratch) await dropAccountContacts(sql, account.id);
    }
  } finally {
    await scratch?.drop();
  }
}

interface LoadContext {
  sql: Sql;
  runFiles: RunFiles;
  probes: CpuProbe[];
  log: (m: string) => void;
  shape: Shape;
  script: UpsertScript;
}

async function loadFile(
  { sql, runFiles, probes, log, shape, script }: LoadContext,
  accountId: string,
  file: FileMeta,
  name: 'A' | 'B',
): Promise<DbaFileRun> {
  const label = `file ${name}${shape.suffix}`;
  const list = (await createStaging(sql, shape)).join(', ');
  await runFiles.ready(file);
  log(`[dba] ${label}: COPY, then the upsert`);
  const cpuStart = await sampleCpu(probes);
  const started = performance.now();
  const writable = await sql
    // An empty cell as '' rather than NULL, so the statement's checks need no null case.
    .unsafe(`copy ${STAGING_TABLE} (${list}) from stdin with (format csv, header, force_not_null (${list}))`)
    .writable();
  await pipeline(createReadStream(file.path, { highWaterMark: 1 << 20 }), writable);
  const copied = performance.now();
  const cpuCopied = await sampleCpu(probes);
  // Not timed: a lean run deletes the file here, before the upsert's data peaks (bench/lib/files.ts).
  await runFiles.read(file);
  const resumed = performance.now();
  const result = await sql.begin(async (tx) => {
    for (const setting of script.settings) await tx.unsafe(setting);
    const upserted = await tx.unsafe(script.upsert, [accountId]);
    await tx.unsafe(script.recount, [accountId]);
    return upserted;
  });
  const done = performance.now();
  const cpuDone = await sampleCpu(probes);
  const upserted = result.count;
  if (upserted !== file.normal)
    throw new Error(`dba ${label}: the upsert wrote ${upserted} contacts, the file has ${file.normal} good emails`);
  const run = {
    file: name,
    seconds: (copied - started + (done - resumed)) / 1000,
    copySeconds: (copied - started) / 1000,
    upsertSeconds: (done - resumed) / 1000,
    upserted,
    cpu: probes.length ? { copy: cpuDelta(cpuStart, cpuCopied), upsert: cpuDelta(cpuCopied, cpuDone) } : undefined,
  };
  log(`[dba] ${label}: ${run.seconds.toFixed(2)} s (COPY ${run.copySeconds.toFixed(2)} s), ${upserted} contacts`);
  return run;
}

/**
 * The staging table made anew: UNLOGGED, a text column per column of the shape's file (its header
 * lowercased), in its order; returns those columns. row_no: the file's order, which DISTINCT ON needs
 * to keep each email's last row.
 */
export async function createStaging(sql: Sql, shape: Shape): Promise<string[]> {
  const columns = shape.columns.map((c) => c.toLowerCase());
  const text = columns.map((c) => `${c} text`).join(', ');
  await sql.unsafe(`drop table if exists ${STAGING_TABLE}`);
  await sql.unsafe(`create unlogged table ${STAGING_TABLE} (row_no bigint generated always as identity, ${text})`);
  return columns;
}

/**
 * The account holds `want` contacts (import A's: the file's distinct good emails), and its tallies
 * count as many (the recount ran, once), else throws.
 */
export async function expectContacts(sql: Sql, accountId: string, want: number, when: string): Promise<void> {
  const [{ n, tallied } = { n: -1, tallied: -1 }] = await sql<{ n: number; tallied: number }[]>`
    select (select count(*)::int from contacts where account_id = ${accountId}) as n,
           (select coalesce(sum(contacts), 0)::int from contact_tallies
             where account_id = ${accountId} and brand_id is null) as tallied`;
  if (n !== want) throw new Error(`dba ${when}: the account holds ${n} contacts, import A gives ${want}`);
  if (tallied !== n) throw new Error(`dba ${when}: the account's tallies count ${tallied} contacts, it holds ${n}`);
}

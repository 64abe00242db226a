/**
 * The chaos soak, whole (issue 39, item 1): one stack as `npm start` runs it, on a private
 * PostgreSQL and Redis; each account importing overlapping files in a loop while its client
 * creates, patches and reads contacts; a seeded fault every few seconds; then the checks. Used by
 * test/faults/chaos-soak.test.ts (the CI shape) and scripts/soak.ts (the full run).
 */
import { soakAccount } from './accounts';
import { soakBed, type SoakBed } from './bed';
import { faultLoop, secs, type FaultState } from './faults';
import { recorder } from './http';
import { importLoop, type ImportRun } from './imports';
import { rngFor } from './prng';
import { judge, type Verdict } from './report';
import { startStack, type Stack } from './stack';
import { client, clientLoop, type Client, type TrafficOptions } from './traffic';
import { checkClientContacts, healthy, replayImports } from './verify';

export interface SoakOptions {
  seed: number;
  /** How long faults and traffic run, ms. */
  durationMs: number;
  /** Pause before each fault, ms. */
  faultEvery: [number, number];
  maxFaults: number;
  /** How long a disk stays full and the store keeps failing, ms. */
  faultHold: [number, number];
  rows: number;
  accounts: number;
  batchSize: number;
  /** How long the last imports may take after the traffic stopped, and the replay in all, ms. */
  drainMs: number;
  replayMs: number;
  /** Ends the soak early (its loops stop, nothing is checked); the stack and the bed are still torn down. */
  signal?: AbortSignal;
  /** Pause between one account's imports, ms. */
  importPause: [number, number];
  traffic: Omit<TrafficOptions, 'seed'>;
  /** Each line as it is known (the fault log comes at the end, with its recovery times). */
  say: (line: string) => void;
}

export interface SoakResult extends Verdict {
  state: FaultState;
  runs: ImportRun[];
}

/** No fault in the last stretch, so the last one's recovery is seen under traffic. */
const QUIET_END_MS = 10_000;
/** A failover manager's decision time, as in fault-failover.test.ts. */
const PROMOTE_AFTER_MS = 3_000;
/** How long the client's contacts are read back for, at most. */
const READ_BACK_MS = 60_000;

export async function runSoak(o: SoakOptions): Promise<SoakResult> {
  let bed: SoakBed | undefined;
  let stack: Stack | undefined;
  let stop = false;
  try {
    bed = await soakBed();
    stack = await startStack(bed, { IMPORT_BATCH_SIZE: String(o.batchSize), ...bed.storeEnv });
    o.say(`soak: seed ${o.seed}, stack at ${stack.url}, log ${stack.log}`);
    const accounts = [];
    for (let i = 0; i < o.accounts; i++) accounts.push(await soakAccount(bed.sql, i, `soak ${i}`));
    const t0 = Date.now();
    const rec = recorder(t0);
    const after = recorder(t0);
    const state: FaultState = { faults: [], pgDown: [], terminated: [] };
    const runs: ImportRun[] = [];
    o.signal?.addEventListener('abort', () => {
      rec.halted = true;
      after.halted = true;
    });
    const clients: Client[] = accounts.map((a) => client(a, { ...o.traffic, seed: o.seed }));
    const importOpts = { seed: o.seed, rows: o.rows, deadline: o.durationMs + o.drainMs };

    const { url } = stack;
    const s = stack;
    const b = bed;
    await Promise.all([
      faultLoop(
        b,
        s,
        rngFor(o.seed, 'faults'),
        t0,
        {
          until: o.durationMs - QUIET_END_MS,
          every: o.faultEvery,
          maxFaults: o.maxFaults,
          hold: o.faultHold,
          promoteAfterMs: PROMOTE_AFTER_MS,
        },
        state,
        () => stop || rec.halted,
        (f) => o.say(`soak: +${secs(f.at)} ${f.kind}: ${f.detail}`),
      ),
      ...clients.map((c) => clientLoop(rec, url, c, { ...o.traffic, seed: o.seed }, o.durationMs)),
      ...accounts.map((a) =>
        importLoop(
          rec,
          url,
          a,
          { ...importOpts, until: o.durationMs, maxFiles: 10_000, pause: o.importPause },
          runs,
        ).then(() =>
          o.say(`soak: account ${a.index} imported ${runs.filter((r) => r.account === a.index).length} files`),
        ),
      ),
    ]);
    stop = true;
    if (o.signal?.aborted) throw new Error('the soak was stopped');
    o.say(`soak: faults and traffic over after ${((Date.now() - t0) / 1000).toFixed(0)} s; checking`);

    const healthyAtEnd = await healthy(url);
    let ambiguous = 0;
    const readBackEnd = Date.now() + READ_BACK_MS;
    for (const c of clients) ambiguous += await checkClientContacts(after, url, c, readBackEnd);
    const replayDeadline = Date.now() - t0 + o.replayMs;
    const check = await replayImports(b.sql, after, url, accounts, runs, { ...importOpts, deadline: replayDeadline });
    if (o.signal?.aborted) throw new Error('the soak was stopped');
    o.say(`soak: replay done after ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    const runningAtEnd = s.running() && (await healthy(url, 5_000));

    const verdict = judge({
      t0,
      state,
      sent: rec.sent,
      after: after.sent,
      runs,
      importDifferences: check.differences,
      mismatches: clients.flatMap((c) => c.mismatches),
      ambiguous,
      deaths: s.deaths,
      alarms: s.alarms,
      healthyAtEnd,
      runningAtEnd,
    });
    for (const line of [...check.summaries, ...verdict.lines]) o.say(line);
    o.say(verdict.last);
    return { ...verdict, state, runs };
  } finally {
    stop = true;
    await stack?.stop().catch((e) => o.say(`soak: stopping the stack failed: ${e}`));
    await bed?.stop().catch((e) => o.say(`soak: stopping the bed failed: ${e}`));
  }
}

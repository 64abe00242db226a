/**
 * The faults, one at a time on a seeded schedule: worker kill -9, API kill -9, PostgreSQL restart
 * -m immediate, pg_terminate_backend of every service connection, Redis kill -9 restarted empty.
 * Kinds are dealt from shuffled decks of all five, so a short run still meets each of them.
 * Each fault records when PostgreSQL was actually down (from the restart until it answers a
 * `select 1` again, plus a grace for the pools to reconnect): only there is a 5xx excused.
 */
import type { FaultBed } from '../fault-bed';
import type { Rng } from './prng';
import { STACK_APP_NAME, type Role, type Stack } from './stack';

export const FAULT_KINDS = ['worker-kill', 'api-kill', 'pg-restart', 'pg-terminate', 'redis-wipe'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** How long after PostgreSQL answers again the pools may still be reconnecting. */
export const RECONNECT_GRACE_MS = 2_000;
/** How long after a terminate its 5xx are labelled "at terminate" in the report (they still count as stray). */
export const TERMINATE_LABEL_MS = 15_000;

export interface Fault {
  /** ms since the soak's start */
  at: number;
  kind: FaultKind;
  detail: string;
  /** For a restart: ms until PostgreSQL answered again. For a kill: ms until the supervisor started the next one. */
  outMs?: number;
}

export interface Window {
  start: number;
  end: number;
}

export interface FaultPlan {
  /** ms since the soak's start: no fault starts after it */
  until: number;
  /** pause before each fault, ms */
  every: [number, number];
  maxFaults: number;
}

export interface FaultState {
  faults: Fault[];
  /** When PostgreSQL was down (grace included). */
  pgDown: Window[];
  /** After each terminate, for the report's label. */
  terminated: Window[];
}

/** Kinds dealt from a shuffled deck of all five, a new deck when one runs out. */
export function dealer(rng: Rng): () => FaultKind {
  let deck: FaultKind[] = [];
  return () => {
    if (!deck.length) deck = rng.shuffle([...FAULT_KINDS]);
    return deck.pop()!;
  };
}

export async function faultLoop(
  bed: FaultBed,
  stack: Stack,
  rng: Rng,
  t0: number,
  plan: FaultPlan,
  state: FaultState,
  stopped: () => boolean,
  told: (f: Fault) => void = () => {},
): Promise<void> {
  const deal = dealer(rng);
  const now = () => Date.now() - t0;
  while (state.faults.length < plan.maxFaults && !stopped()) {
    await Bun.sleep(rng.int(plan.every[0], plan.every[1]));
    if (now() > plan.until || stopped()) break;
    const kind = deal();
    const fault: Fault = { at: now(), kind, detail: '' };
    state.faults.push(fault);
    await inject(bed, stack, fault, state, now);
    told(fault);
  }
}

async function inject(bed: FaultBed, stack: Stack, fault: Fault, state: FaultState, now: () => number) {
  switch (fault.kind) {
    case 'worker-kill':
    case 'api-kill':
      return killRole(stack, fault.kind === 'api-kill' ? 'api' : 'worker', fault, now);
    case 'pg-restart': {
      const window = { start: fault.at, end: Infinity };
      state.pgDown.push(window);
      try {
        await bed.restartPostgres();
        await until(async () => (await bed.sql`select 1 as ok`)[0]?.ok === 1, 120_000);
        fault.outMs = now() - fault.at;
        fault.detail = `PostgreSQL answered again after ${secs(fault.outMs)}`;
      } catch (e) {
        fault.detail = `restart failed: ${e instanceof Error ? e.message : e}`;
      } finally {
        window.end = now() + RECONNECT_GRACE_MS;
      }
      return;
    }
    case 'pg-terminate': {
      const [r] = await bed.sql<{ n: number }[]>`
        select count(*)::int as n from (
          select pg_terminate_backend(pid) from pg_stat_activity
          where application_name = ${STACK_APP_NAME} and pid <> pg_backend_pid()
        ) t`.catch(() => [{ n: -1 }]);
      fault.detail = `${r!.n} backends terminated`;
      state.terminated.push({ start: fault.at, end: fault.at + TERMINATE_LABEL_MS });
      return;
    }
    case 'redis-wipe':
      await bed.killRedis();
      await bed.startRedis();
      fault.outMs = now() - fault.at;
      fault.detail = `redis-server back, empty, after ${secs(fault.outMs)}`;
      return;
  }
}

async function killRole(stack: Stack, role: Role, fault: Fault, now: () => number) {
  const pid = stack.kill(role);
  if (pid === undefined) {
    fault.detail = `no live ${role} to kill (it is being restarted)`;
    return;
  }
  const restarted = await until(async () => stack.pid(role) !== pid, 60_000).then(
    () => true,
    () => false,
  );
  fault.outMs = now() - fault.at;
  fault.detail = restarted
    ? `pid ${pid}; the supervisor started pid ${stack.pid(role)} after ${secs(fault.outMs)}`
    : `pid ${pid}; not restarted within 60 s`;
}

export const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

async function until(check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`not within ${ms} ms`);
    await Bun.sleep(100);
  }
}

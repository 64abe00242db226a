/**
 * The faults, one at a time on a seeded schedule: worker kill -9, API kill -9, PostgreSQL restart
 * -m immediate, pg_terminate_backend of every service connection, Redis kill -9 restarted empty,
 * a failover to the standby (the old primary then rebuilt as the new standby), PostgreSQL's disk
 * full and freed, the object store failing a share of the service's requests for a while.
 * Kinds are dealt from shuffled decks of all of them, so a short run still meets each of them.
 * Each fault records when PostgreSQL was away or full (from the restart, kill or fill until it
 * answers a `select 1` again or the space is back, plus a grace for the pools to reconnect): only
 * there is a 5xx excused.
 */
import type { S3Fault } from '../s3-fault-proxy';
import type { SoakBed } from './bed';
import type { Rng } from './prng';
import { STACK_APP_NAME, type Role, type Stack } from './stack';

export const FAULT_KINDS = [
  'worker-kill',
  'api-kill',
  'pg-restart',
  'pg-terminate',
  'redis-wipe',
  'pg-failover',
  'disk-full',
  'object-store',
] as const;
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
  /** ms since the soak's start when a fault that lasts was lifted: space freed, standby promoted, store back. */
  liftedAt?: number;
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
  /** How long a disk stays full and the store keeps failing, ms. */
  hold: [number, number];
  /** From a failover's kill to the promotion, ms (what a failover manager takes to decide). */
  promoteAfterMs: number;
}

export interface FaultState {
  faults: Fault[];
  /** When PostgreSQL was down or its disk full (grace included). */
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

/** The store's faults a draw picks from; a share of the service's requests meets it. */
const STORE_FAULTS: S3Fault[] = ['error500', 'slowDown', 'reset', 'stall', 'truncate', 'stallBody'];
const STORE_FAULT_RATE = 0.3;

export async function faultLoop(
  bed: SoakBed,
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
    await inject(bed, stack, fault, state, now, { ...plan, rng });
    told(fault);
  }
}

async function inject(
  bed: SoakBed,
  stack: Stack,
  fault: Fault,
  state: FaultState,
  now: () => number,
  o: FaultPlan & { rng: Rng },
) {
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
    case 'pg-failover':
      return failover(bed, fault, state, now, o.promoteAfterMs);
    case 'disk-full':
      return diskFull(bed, stack, fault, state, now, o.rng.int(o.hold[0], o.hold[1]));
    case 'object-store':
      return storeFailing(bed, fault, now, o.rng.pick(STORE_FAULTS), o.rng.int(o.hold[0], o.hold[1]));
  }
}

/** Until the pool's `select 1` is answered (by whichever server is the primary); ms since the start. */
async function answering(bed: SoakBed, now: () => number): Promise<number> {
  await until(async () => (await bed.sql`select 1 as ok`)[0]?.ok === 1, 120_000);
  return now();
}

/**
 * The primary killed, the standby promoted, then the old primary rebuilt as the new standby so the
 * next failover has one. PostgreSQL is away from the kill until the new primary answers.
 */
async function failover(bed: SoakBed, fault: Fault, state: FaultState, now: () => number, promoteAfterMs: number) {
  const window = { start: fault.at, end: Infinity };
  state.pgDown.push(window);
  try {
    const f = await bed.pair.failover({ promoteAfterMs });
    fault.liftedAt = f.promotedAt - (Date.now() - now());
    const answered = await answering(bed, now);
    fault.outMs = answered - fault.at;
    window.end = answered + RECONNECT_GRACE_MS;
    fault.detail =
      `${f.killed.name} killed, ${f.promoted.name} promoted after ${secs(f.promotedAt - f.killedAt)}, ` +
      `answering ${secs(answered - fault.liftedAt)} later`;
    const r = await bed.pair.rebuildStandby();
    fault.detail += `; ${f.killed.name} rebuilt as its standby by ${r.how} in ${secs(r.ms)}`;
  } catch (e) {
    fault.detail += `${fault.detail ? '; ' : ''}failover failed: ${e instanceof Error ? e.message : e}`;
  } finally {
    if (window.end === Infinity) window.end = now() + RECONNECT_GRACE_MS;
  }
}

/** The primary's tables disk full for `holdMs`, then freed; the server started again if it stopped. */
async function diskFull(
  bed: SoakBed,
  stack: Stack,
  fault: Fault,
  state: FaultState,
  now: () => number,
  holdMs: number,
) {
  const window = { start: fault.at, end: Infinity };
  const waitsBefore = stack.diskWaits.length;
  state.pgDown.push(window);
  const node = bed.pair.primary();
  const disk = bed.disk(node);
  try {
    const used = await disk.fill();
    await Bun.sleep(holdMs);
    await disk.free();
    fault.liftedAt = now();
    const restarted = await bed.startPrimaryIfStopped();
    const answered = await answering(bed, now);
    fault.outMs = fault.liftedAt - fault.at;
    fault.detail =
      `${node.name}'s tables disk full at ${(used / 1024 ** 2).toFixed(0)} MiB for ${secs(fault.outMs)}, then freed; ` +
      `imports waited ${stack.diskWaits.length - waitsBefore} times` +
      (restarted ? `; the server had stopped: started, answering ${secs(answered - fault.liftedAt)} later` : '');
  } catch (e) {
    fault.detail = `disk full failed: ${e instanceof Error ? e.message : e}`;
    await disk.free().catch(() => {});
  } finally {
    window.end = now() + RECONNECT_GRACE_MS;
  }
}

/**
 * The store fails a share of the service's requests for `holdMs`. The client's presigned PUTs pass:
 * the client is not the service under test.
 */
async function storeFailing(bed: SoakBed, fault: Fault, now: () => number, kind: S3Fault, holdMs: number) {
  const { proxy } = bed.s3;
  const before = proxy.injected;
  const seen = proxy.requests.length;
  proxy.set({ fault: kind, rate: STORE_FAULT_RATE, match: (r) => !r.target.includes('X-Amz-Signature') });
  await Bun.sleep(holdMs);
  proxy.set(undefined);
  fault.liftedAt = now();
  fault.outMs = fault.liftedAt - fault.at;
  fault.detail =
    `${kind} on ${STORE_FAULT_RATE * 100}% of the service's requests for ${secs(fault.outMs)}: ` +
    `${proxy.injected - before} of ${proxy.requests.length - seen} requests`;
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

/**
 * The mixed step's load on another account (steps/mixed.ts): GET, POST and PATCH at once, either
 * closed loop (autocannon, 32 connections in all, each sending its next request when the last one
 * is answered: as much as the API serves) or open loop at a fixed rate per kind (open-loop.ts: a
 * realistic load that does not slow down when the API does). Every answer goes in the timeline's
 * phase of its request's send time and, given `seriesFrom`, in its window of a series.
 */
import type { Sql } from '../../src/db';
import type { BenchAccount } from './account';
import { LatencySeries } from './latency-series';
import { openLoop } from './open-loop';
import { PhaseLoad, type PhaseTimeline } from './phase-latency';
import type { HttpTarget, PoolContact } from './types';
import { load, requestAt, verify, type Scenario } from '../steps/http';

export const KINDS = ['GET', 'POST', 'PATCH'] as const;
/** Connections per kind of the closed loop: 32 in all, as the load. */
export const CONNECTIONS: Record<Scenario, number> = { GET: 12, POST: 10, PATCH: 10 };
/**
 * The import's load also in windows of this many seconds by send time (latency-series.ts): when in a
 * phase its tail came. A window's histogram holds 80 kB a kind, about 25 MB for an hour's import.
 */
export const SERIES_SECONDS = 10;

export interface LoadResult {
  ok2xx: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  /** requests that may have committed unanswered when the load stopped (the end-state checks' slack) */
  slack: number;
}

export interface KindLoad {
  scenario: Scenario;
  phases: PhaseLoad;
  series?: LatencySeries;
  /** req/s offered (open loop); absent: closed loop on CONNECTIONS */
  rate?: number;
  result: Promise<LoadResult>;
  stop(): void;
}

export interface Load {
  kinds: KindLoad[];
  stop(): void;
  /** performance.now() when every kind's load has ended */
  ended: Promise<number>;
}

/** Closed loop without `rates`, else open loop at each kind's rate (req/s). */
export function startLoad(
  target: HttpTarget,
  pool: readonly PoolContact[],
  tag: string,
  seconds: number,
  timeline: PhaseTimeline,
  opts: { seriesFrom?: number; rates?: Record<Scenario, number> } = {},
): Load {
  const kinds = KINDS.map((scenario): KindLoad => {
    const phases = new PhaseLoad(timeline);
    const series = opts.seriesFrom === undefined ? undefined : new LatencySeries(SERIES_SECONDS);
    series?.begin(opts.seriesFrom!);
    const listener = {
      response: (now: number, ms: number, status: number) => {
        phases.response(now, ms, status);
        series?.add(now - ms, ms);
      },
      error: (now: number) => phases.error(now),
    };
    const kindTag = `${tag}-${scenario}`;
    const rate = opts.rates?.[scenario];
    if (rate !== undefined) {
      const send = async (n: number, signal: AbortSignal) => {
        const r = requestAt(scenario, n, pool, kindTag);
        const res = await fetch(`${target.baseUrl}${r.path}`, {
          method: r.method,
          body: r.body,
          headers: { ...target.headers, 'content-type': 'application/json' },
          signal,
        });
        await res.arrayBuffer();
        return res.status;
      };
      const loop = openLoop(send, rate, seconds, listener);
      const result = loop.done.then((r) => ({
        ok2xx: r.ok2xx,
        non2xx: r.non2xx,
        errors: r.errors,
        timeouts: 0,
        statusCodes: r.statusCodes,
        // Drained: every request sent has its answer, but one that timed out may have committed.
        slack: r.errors,
      }));
      return { scenario, phases, series, rate, result, stop: loop.stop };
    }
    const instance = load(target, scenario, pool, kindTag, CONNECTIONS[scenario], seconds);
    instance.on('response', (_client, status, _bytes, ms) => listener.response(performance.now(), ms, status));
    instance.on('reqError', () => listener.error(performance.now()));
    const result = Promise.resolve(instance).then((r) => ({
      ok2xx: r['2xx'],
      non2xx: r.non2xx,
      errors: r.errors,
      timeouts: r.timeouts,
      statusCodes: Object.fromEntries(Object.entries(r.statusCodeStats).map(([k, v]) => [k, v.count])),
      // Requests in flight when the clock stopped may have committed without being counted.
      slack: CONNECTIONS[scenario],
    }));
    return { scenario, phases, series, result, stop: () => instance.stop() };
  });
  const ended = Promise.all(kinds.map((k) => k.result)).then(() => performance.now());
  return { kinds, stop: () => kinds.forEach((k) => k.stop()), ended };
}

/**
 * Waits for the load's end, then the checks of the HTTP step: no error, no non-2xx, and the database
 * holds what the 2xx answers promise (the load's own counts: they include what no span shows).
 */
export async function checkLoad(
  sql: Sql,
  account: BenchAccount,
  pool: readonly PoolContact[],
  l: Load,
  tag: string,
): Promise<void> {
  for (const { scenario: s, phases, result } of l.kinds) {
    const r = await result;
    if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0)
      throw new Error(
        `mixed ${tag} ${s}: ${r.non2xx} non-2xx answers (${JSON.stringify(r.statusCodes)}), ` +
          `${r.errors} errors, ${r.timeouts} timeouts (by phase: ${phases.faults()})`,
      );
    await verify(sql, account.id, s, `${tag}-${s}`, r.ok2xx, pool, r.slack);
  }
}

/**
 * HTTP load: GET /v1/contacts/{emailMd5}, POST /v1/contacts (new emails) and PATCH
 * /v1/contacts/{emailMd5} under autocannon, against the API and against the baseline server in the
 * same run. Each pair first sends one request checked field by field, then a short warm-up, then the
 * measured run; afterwards the database must show what the 2xx answers claimed.
 */
import autocannon, { type RawRequest } from 'autocannon';
import type { Sql } from '../../src/db';
import { cpuDelta, type CpuSample } from '../lib/cpu';
import { md5Hex, md5Uuid } from '../lib/dataset';
import { median } from '../lib/format';
import type { HttpRow, HttpTarget, PoolContact } from '../lib/types';

export interface HttpOptions {
  connections: number;
  seconds: number;
  warmupSeconds: number;
  /** Measured runs of each scenario against each server (runHttp). */
  rounds: number;
  /**
   * Processes of the API and of the bare server measured beside the one-process pair (`api-Np`,
   * `baseline-Np`: lib/process-groups.ts); 1 or absent: not measured.
   */
  apiProcesses?: number;
  /**
   * The API with RATE_LIMITS=false measured beside it (`api-no-limits`): what the limits cost, under
   * the same load on the machine. Off by default (`--http-no-limits`): it adds a third of the step.
   */
  noLimits?: boolean;
  /** CPU seconds of the processes serving the requests, sampled around each measured run */
  sampleCpu?: () => Promise<CpuSample>;
}
export type Scenario = 'GET' | 'POST' | 'PATCH';

/** The API's req/s over the baseline server's: issue 35's targets (issue 15's were 0.75, 0.6, 0.6). */
export const MIN_RATIO: Record<Scenario, number> = { GET: 0.85, POST: 0.7, PATCH: 0.7 };
export const GET_P99_MS = 25;

/** The email of a run's n-th POST: `tag` makes it unique to the run. */
const postEmail = (tag: string, n: number) => `load-${tag}-${n}@post.benchmark-example.com`;

/**
 * POSTs the end-state check looks up past the last one that may have been sent: a contact created
 * for a request that was never answered 2xx, within that reach, shows as one too many.
 */
const POST_LOOKAHEAD = 1000;
/** Keys per lookup of that check: the mixed step's POSTs through a 25M import number about a million. */
const KEYS_PER_LOOKUP = 50_000;

/** The n-th request of a scenario; `tag` makes POST emails and PATCH values unique to this run. */
export function requestAt(s: Scenario, n: number, pool: readonly PoolContact[], tag: string): RawRequest {
  const c = pool[n % pool.length]!;
  if (s === 'GET') return { method: 'GET', path: `/v1/contacts/${c.md5}` };
  if (s === 'POST') {
    const body = {
      email: postEmail(tag, n),
      attributes: { first_name: 'Load', city: 'Load City', tags: ['load', 'bench'] },
    };
    return { method: 'POST', path: '/v1/contacts', body: JSON.stringify(body) };
  }
  const body = { attributes: { first_name: `Patched ${tag} ${n}`, city: 'Patch City', tags: ['patched'] } };
  return { method: 'PATCH', path: `/v1/contacts/${c.md5}`, body: JSON.stringify(body) };
}

/** The running load (awaited for its result; the mixed step also listens to its answers and stops it). */
export function load(
  t: HttpTarget,
  s: Scenario,
  pool: readonly PoolContact[],
  tag: string,
  connections: number,
  seconds: number,
) {
  let n = 0;
  return autocannon({
    url: t.baseUrl,
    connections,
    duration: seconds,
    headers: { ...t.headers, 'content-type': 'application/json' },
    requests: [{ setupRequest: (req) => ({ ...req, ...requestAt(s, n++, pool, tag) }) }],
  });
}

/** One request through fetch whose answer is checked, so a load run cannot measure error pages. */
export async function preflight(t: HttpTarget, s: Scenario, pool: readonly PoolContact[], tag: string): Promise<void> {
  const r = requestAt(s, 0, pool, tag);
  const res = await fetch(`${t.baseUrl}${r.path}`, {
    method: r.method,
    body: r.body,
    headers: { ...t.headers, 'content-type': 'application/json' },
  });
  const text = await res.text();
  const body = JSON.parse(text || '{}') as { email?: string; emailMd5?: string; attributes?: Record<string, unknown> };
  const want = s === 'POST' ? 201 : 200;
  const ok =
    res.status === want &&
    (s !== 'GET' || (body.emailMd5 === pool[0]!.md5 && body.email?.trim().toLowerCase() === pool[0]!.email)) &&
    (s !== 'POST' || body.email === postEmail(tag, 0)) &&
    (s !== 'PATCH' || body.attributes?.first_name === `Patched ${tag} 0`);
  if (!ok) throw new Error(`${t.name} ${s} check failed: ${res.status} ${text.slice(0, 300)}`);
}

/** The end state the 2xx answers promise: POSTed contacts exist, PATCHed contacts carry the value. */
export async function verify(
  sql: Sql,
  accountId: string,
  s: Scenario,
  tag: string,
  ok2xx: number,
  pool: readonly PoolContact[],
  connections: number,
) {
  if (s === 'POST') {
    // By key, each email the run may have sent and some after, in slices. A scan for the tag's emails
    // read all the imports' contacts: at 25M rows the HTTP step took 137 s more than at 1M, nine POST
    // runs (bench/findings/2026-12-07-default-run-25m.md, 2026-12-06-pacing-by-harm.md).
    const sent = ok2xx + connections + POST_LOOKAHEAD;
    let n = 0;
    for (let from = 0; from < sent; from += KEYS_PER_LOOKUP) {
      const keys = Array.from({ length: Math.min(KEYS_PER_LOOKUP, sent - from) }, (_, i) =>
        md5Uuid(md5Hex(postEmail(tag, from + i))),
      );
      const [row] = await sql<{ n: number }[]>`
        select count(*)::int as n from contacts
        where account_id = ${accountId} and email_md5 = any(${sql.array(keys)}::uuid[])`;
      n += row?.n ?? 0;
    }
    // Requests in flight when the clock stopped may have committed without being counted.
    if (n < ok2xx || n > ok2xx + connections)
      throw new Error(`POST ${tag}: ${ok2xx} answered 2xx but ${n} contacts were created`);
  } else if (s === 'PATCH') {
    const md5s = pool.map((c) => md5Uuid(c.md5));
    const [{ n } = { n: 0 }] = await sql<{ n: number }[]>`
      select count(*)::int as n from contacts
      where account_id = ${accountId} and email_md5 = any(${sql.array(md5s)}::uuid[])
        and attributes->>'first_name' like ${`Patched ${tag} %`}`;
    const expected = Math.min(pool.length, ok2xx) - connections;
    if (n < expected)
      throw new Error(`PATCH ${tag}: ${ok2xx} answered 2xx but only ${n} contacts carry the patched value`);
  }
}

/** One measured run of a scenario against one server. */
interface Measured {
  reqPerSec: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  ok2xx: number;
  cpu?: CpuSample;
}

/**
 * Each scenario against each server `opts.rounds` times, the servers' order reversed every other
 * round: one 10 s run of a server moved by a quarter from the next on these 2-core machines (GET
 * against the baseline 0.52-0.68 x in runs of one commit), more than the changes it has to judge.
 * A row's req/s, p50 and p99 are its rounds' medians, its ratio the median of the rounds' ratios
 * to the baseline of the same round, its CPU per request all rounds' CPU over all their answers.
 */
export async function runHttp(
  targets: { api: HttpTarget; baseline: HttpTarget; noLimits?: HttpTarget; others?: HttpTarget[] },
  pool: readonly PoolContact[],
  sql: Sql,
  accountId: string,
  opts: HttpOptions,
  runId: string,
  log: (m: string) => void,
): Promise<HttpRow[]> {
  const servers = [
    targets.baseline,
    ...(targets.noLimits ? [targets.noLimits] : []),
    targets.api,
    ...(targets.others ?? []),
  ];
  const scenarios = ['GET', 'POST', 'PATCH'] as const;
  const runs = new Map<string, Measured[]>();
  for (let round = 0; round < opts.rounds; round++) {
    for (const s of scenarios) {
      for (const t of round % 2 === 0 ? servers : [...servers].reverse()) {
        const m = await measure(t, s, pool, sql, accountId, opts, `${runId}-r${round}`, log);
        const key = `${s} ${t.name}`;
        runs.set(key, [...(runs.get(key) ?? []), m]);
      }
    }
  }
  const rows: HttpRow[] = [];
  for (const s of scenarios) {
    for (const t of servers) {
      const mine = runs.get(`${s} ${t.name}`)!;
      const ok2xx = mine.reduce((n, m) => n + m.ok2xx, 0);
      const cpu = mine[0]!.cpu && sumCpu(mine.map((m) => m.cpu!));
      const row: HttpRow = {
        scenario: s,
        target: t.name,
        reqPerSec: median(mine.map((m) => m.reqPerSec)),
        p50: median(mine.map((m) => m.p50)),
        p99: median(mine.map((m) => m.p99)),
        non2xx: mine.reduce((n, m) => n + m.non2xx, 0),
        errors: mine.reduce((n, m) => n + m.errors, 0),
        cpuMsPerRequest: cpu && Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, (1000 * v) / ok2xx])),
        rounds: mine.map((m) => m.reqPerSec),
      };
      if (!t.name.startsWith('baseline')) {
        // Each against its own bare server: the N-process API against the N-process baseline.
        const baseline = runs.get(`${s} ${t.against ?? 'baseline'}`)!;
        const ratios = mine.map((m, i) => m.reqPerSec / baseline[i]!.reqPerSec);
        Object.assign(row, { ratio: median(ratios), ...(t.name === 'api' && { minRatio: MIN_RATIO[s] }) });
        log(`[http] ${s} ${t.name}: x baseline per round ${ratios.map((r) => r.toFixed(2)).join(', ')}`);
      }
      rows.push(row);
    }
    const off = rows.find((r) => r.scenario === s && r.target === 'api-no-limits');
    const on = rows.find((r) => r.scenario === s && r.target === 'api');
    if (off && on) {
      const cpu = (r: HttpRow, p: string) => r.cpuMsPerRequest?.[p]?.toFixed(4) ?? '-';
      log(
        `[http] ${s} rate limits on/off: ${(on.reqPerSec / off.reqPerSec).toFixed(3)} x req/s, ` +
          `API CPU ${cpu(on, 'api')} / ${cpu(off, 'api-no-limits')} ms per request`,
      );
    }
  }
  return rows;
}

function sumCpu(samples: CpuSample[]): CpuSample {
  const total: CpuSample = {};
  for (const c of samples) for (const [k, v] of Object.entries(c)) total[k] = (total[k] ?? 0) + v;
  return total;
}

/** Preflight, warm-up and one measured run; the end state its 2xx answers promise is checked after. */
async function measure(
  t: HttpTarget,
  s: Scenario,
  pool: readonly PoolContact[],
  sql: Sql,
  accountId: string,
  opts: HttpOptions,
  runTag: string,
  log: (m: string) => void,
): Promise<Measured> {
  // Distinct tags per phase and round, so the end-state checks count only the measured run.
  const tag = `${t.name}-${runTag}-m`;
  await preflight(t, s, pool, `${t.name}-${runTag}-c`);
  if (opts.warmupSeconds > 0) await load(t, s, pool, `${t.name}-${runTag}-w`, opts.connections, opts.warmupSeconds);
  log(`[http] ${s} ${t.name}: ${opts.connections} connections for ${opts.seconds}s`);
  const cpuBefore = await opts.sampleCpu?.();
  const r = await load(t, s, pool, tag, opts.connections, opts.seconds);
  const cpu = cpuBefore && cpuDelta(cpuBefore, await opts.sampleCpu!());
  const reqPerSec = r['2xx'] / r.duration;
  log(
    `[http] ${s} ${t.name}: ${Math.round(reqPerSec)} req/s, p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, ` +
      `non-2xx ${r.non2xx}`,
  );
  if (r.non2xx > 0 || r.errors > 0)
    throw new Error(
      `${t.name} ${s}: ${r.non2xx} non-2xx answers (${JSON.stringify(r.statusCodeStats)}), ${r.errors} errors`,
    );
  await verify(sql, accountId, s, tag, r['2xx'], pool, opts.connections);
  const measured: Measured = {
    reqPerSec,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    ok2xx: r['2xx'],
  };
  if (cpu) measured.cpu = cpu;
  return measured;
}

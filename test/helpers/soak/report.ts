/**
 * What the soak prints and judges: one line per fault (when, what, how long until 2xx again), then
 * the failures in detail, then one last line with the totals. A 5xx is stray unless its request
 * overlapped a time PostgreSQL was down or its disk full; a request with no answer is excused only while the API
 * process was gone (killed, until it served again).
 */
import { FAULT_KINDS, secs, type Fault, type FaultState, type Window } from './faults';
import { is2xx, type Sent } from './http';
import type { ImportRun } from './imports';
import type { Mismatch } from './traffic';
import type { Death } from './stack';

export interface Observed {
  t0: number;
  state: FaultState;
  sent: Sent[];
  /** Requests made after the soak (final reads, the replay): judged for their answers, not counted. */
  after: Sent[];
  runs: ImportRun[];
  importDifferences: string[];
  mismatches: Mismatch[];
  ambiguous: number;
  deaths: Death[];
  alarms: string[];
  healthyAtEnd: boolean;
  runningAtEnd: boolean;
}

export interface Verdict {
  lines: string[];
  last: string;
  failures: string[];
  passed: boolean;
}

const n = (x: number) => x.toLocaleString('en-US');
const overlaps = (s: Sent, w: Window) => s.start <= w.end && s.end >= w.start;
const is5xx = (s: Sent) => (s.status ?? 0) >= 500;

/** ms from the fault until a request started after it was answered 2xx. */
function backAfter(f: Fault, sent: Sent[]): number | undefined {
  let best: number | undefined;
  for (const s of sent)
    if (s.start >= f.at && is2xx(s) && !s.route.startsWith('/uploads/') && (best === undefined || s.end < best))
      best = s.end;
  return best === undefined ? undefined : best - f.at;
}

const isWrite = (s: Sent) =>
  s.route === '/v1/contacts' || (s.method === 'PATCH' && s.route.startsWith('/v1/contacts/'));

/**
 * For a fault that lasts (a full disk, a failover, the store failing): how long after it was lifted
 * the service was whole again. Writes for PostgreSQL's faults, an import's end for the store's.
 */
function recovery(f: Fault, o: Observed): string {
  if (f.liftedAt === undefined) return '';
  const from = f.liftedAt;
  if (f.kind === 'object-store') {
    const ends = o.runs
      .filter((r) => r.start < from && r.end >= from && r.final.status === 'success')
      .map((r) => r.end);
    const next = o.runs.filter((r) => r.end >= from && r.final.status === 'success').map((r) => r.end);
    const first = Math.min(...(ends.length ? ends : next));
    const n = ends.length;
    return `; after the store's return: ${n} imports in flight ended success, the first ${gap(first - from)} after`;
  }
  const write = o.sent.filter((s) => s.end >= from && isWrite(s) && is2xx(s)).map((s) => s.end);
  const what = f.kind === 'pg-failover' ? 'the promotion' : 'the freeing';
  return `; a 2xx write ${gap(Math.min(...write) - from)} after ${what}`;
}

const gap = (ms: number) => (Number.isFinite(ms) ? secs(ms) : 'never');

/**
 * The imports the fault met, and the 5xx answered to requests sent from this fault until the next,
 * with the slowest answer among them.
 */
function aftermath(f: Fault, o: Observed): string {
  const next = o.state.faults.find((g) => g.at > f.at)?.at ?? Infinity;
  const mine = o.sent.filter((s) => s.start >= f.at - 1_000 && s.start < next && s.end >= f.at);
  const errors = mine.filter(is5xx);
  const importing = o.runs.filter((r) => r.start <= f.at && r.end >= f.at).length;
  if (!errors.length) return `; ${importing} imports in flight`;
  const slowest = Math.max(...errors.map((s) => s.end - s.start));
  return `; ${importing} imports in flight; 5xx ×${errors.length}, the slowest after ${secs(slowest)}`;
}

export function judge(o: Observed): Verdict {
  const lines: string[] = [];
  const failures: string[] = [];
  const rel = (at: number) => at - o.t0;

  // When the API process was away: from each kill (or death) until a 2xx again, and a second more.
  const apiAway: Window[] = [];
  for (const f of o.state.faults) {
    const back = backAfter(f, o.sent);
    const again = back === undefined ? 'never' : secs(back);
    const head = `+${secs(f.at).padStart(8)}  ${f.kind.padEnd(12)}  ${f.detail}`;
    lines.push(`${head}; 2xx again after ${again}${recovery(f, o)}${aftermath(f, o)}`);
    if (f.kind === 'api-kill') apiAway.push({ start: f.at, end: f.at + (back ?? Infinity) + 1_000 });
  }
  for (const d of o.deaths.filter((d) => d.role === 'api' && !d.expected)) {
    const at = rel(d.at);
    const back = backAfter({ at, kind: 'api-kill', detail: '' }, o.sent);
    apiAway.push({ start: at - 1_000, end: at + (back ?? Infinity) + 1_000 });
  }

  const all = [...o.sent, ...o.after];
  const stray = all.filter((s) => is5xx(s) && !o.state.pgDown.some((w) => overlaps(s, w)));
  const atTerminate = stray.filter((s) => o.state.terminated.some((w) => overlaps(s, w)));
  const unexplained = all.filter((s) => s.noAnswer && !apiAway.some((w) => overlaps(s, w)));
  const bad = all.filter((s) => s.bad);
  const unexpected = o.deaths.filter((d) => !d.expected);
  const mismatches = o.importDifferences.length + o.mismatches.length;

  const show = (title: string, items: string[]) => {
    if (!items.length) return;
    failures.push(`${title}: ${items.length}`);
    lines.push(`${title} (${items.length}):`, ...items.slice(0, 12).map((i) => `  ${i}`));
    if (items.length > 12) lines.push(`  … and ${items.length - 12} more`);
  };
  const req = (s: Sent) =>
    `+${secs(s.start)} ${s.method} ${s.route} → ${s.status ?? s.noAnswer} after ${secs(s.end - s.start)}` +
    `${s.bad ? ` (${s.bad})` : ''}${o.state.terminated.some((w) => overlaps(s, w)) ? ' [at terminate]' : ''}`;
  show('stray 5xx (PostgreSQL was up, its disk not full)', stray.map(req));
  show('no answer while the API process was running', unexplained.map(req));
  show('error answers breaking the contract', bad.map(req));
  show('imports unlike their fault-free replay', o.importDifferences);
  show(
    'client contacts unlike their last write',
    o.mismatches.map(
      (m) =>
        `account ${m.account} ${m.email} (${m.when}): ${JSON.stringify(m.got)}; allowed ${JSON.stringify(m.expected)}`,
    ),
  );
  show(
    'processes that exited without being killed',
    unexpected.map((d) => `+${secs(rel(d.at))} ${d.role} pid ${d.pid}: ${d.why}`),
  );
  if (o.alarms.length) lines.push('alarming log lines:', ...o.alarms.slice(0, 12).map((a) => `  ${a}`));
  if (!o.healthyAtEnd) show('the stack at the end', ['/readyz was not 200 within 60 s']);
  if (!o.runningAtEnd) show('the stack at the end', ['start.ts, the API or the worker is not running']);
  if (!o.runs.length) show('imports', ['none ran']);

  const byKind = FAULT_KINDS.map((k) => `${k} ${o.state.faults.filter((f) => f.kind === k).length}`).join(', ');
  const statuses = new Map<string, number>();
  for (const s of o.sent) {
    const k = s.status === undefined ? 'no answer' : is2xx(s) ? '2xx' : String(s.status);
    statuses.set(k, (statuses.get(k) ?? 0) + 1);
  }
  const order = (k: string) => (k === '2xx' ? 0 : k === 'no answer' ? 1_000 : Number(k));
  const byStatus = [...statuses]
    .sort(([a], [b]) => order(a) - order(b))
    .map(([k, c]) => `${k} ${n(c)}`)
    .join(', ');
  const success = o.runs.filter((r) => r.final.status === 'success').length;
  const last =
    `soak: ${o.state.faults.length} faults (${byKind}), ${o.runs.length} imports (${success} success), ` +
    `${n(o.sent.length)} requests (${byStatus}), stray 5xx ${stray.length} (at terminate ${atTerminate.length}), ` +
    `unexplained no answer ${unexplained.length}, bad error answers ${bad.length}, ` +
    `mismatches ${mismatches} (ambiguous writes ${o.ambiguous}), unexpected exits ${unexpected.length}`;
  return { lines, last, failures, passed: failures.length === 0 };
}

/**
 * Step `suppression-check` (issue 37, item 3): POST /v1/suppression-checks of 1,000 addresses against
 * three lists of an account of its own, one of each format, each of min(--rows, 10M) records (the
 * issue's figure: 10M each). The lists are loaded in SQL (insert … select from generate_series, sorted
 * by value so the primary key grows at its right edge; then vacuum analyze, as autovacuum would leave
 * an insert-only table), not through the API. The addresses are a model: `s<i>@check.bench.example`,
 * held by the plain list when i = 2g, the md5 list when i = 3g, the sha512 list when i = 5g (g < N).
 * A check draws i from [0, 6N) (about 39 % suppressed somewhere), sent uppercased or padded with
 * spaces one time in three each. Timed through the real HTTP API, one request at a time, then four at a
 * time; every answer is checked against the model (email as sent, the list ids in creation order).
 * The statement alone through postgres.js (no HTTP) is timed too, to split the figure.
 */
import type { Sql } from '../../src/db';
import { checkAddresses } from '../../src/suppressions/check';
import { createBenchAccount, type BenchAccount } from '../lib/account';
import { percentile } from '../lib/phase-latency';
import { fix, fmtInt, table } from '../lib/format';
import type { Target } from '../lib/types';
import { VerificationError } from '../lib/verify';

/** The issue's target: a check of 1,000 addresses, p99 at most this, with three lists of 10M records. */
export const CHECK_P99_TARGET_MS = 50;
const MAX_RECORDS = 10_000_000;
const BATCH = 1000;
const FORMATS = [
  { format: 'plain text', step: 2 },
  { format: 'md5', step: 3 },
  { format: 'sha512', step: 5 },
] as const;

export interface CheckPhase {
  label: string;
  concurrency: number;
  requests: number;
  seconds: number;
  p50: number;
  p99: number;
  max: number;
}

export interface SuppressionCheckRun {
  recordsPerList: number;
  loadSeconds: number;
  phases: CheckPhase[];
  /** answers checked against the model, and their share that was suppressed */
  answersChecked: number;
  suppressedShare: number;
}

interface Ctx {
  baseUrl: string;
  sql: Sql;
}

const address = (i: number) => `s${i}@check.bench.example`;

/** The model: which lists hold address i, in creation order. */
function listsOf(i: number, lists: string[], n: number): string[] {
  return FORMATS.flatMap((f, k) => (i % f.step === 0 && i / f.step < n ? [lists[k]!] : []));
}

/** One request's addresses: indexes, and the entries as sent (a third uppercased, a third padded). */
function drawBatch(n: number): { indexes: number[]; emails: string[] } {
  const indexes = Array.from({ length: BATCH }, () => Math.floor(Math.random() * 6 * n));
  const emails = indexes.map((i, k) =>
    k % 3 === 0 ? address(i).toUpperCase() : k % 3 === 1 ? ` ${address(i)} ` : address(i),
  );
  return { indexes, emails };
}

async function loadLists(sql: Sql, account: BenchAccount, n: number, log: (m: string) => void): Promise<string[]> {
  const lists: string[] = [];
  // One statement each, so each list has its own created_at: the answer's order is creation order.
  for (const { format } of FORMATS) {
    const [row] = await sql<{ id: string }[]>`
      insert into suppression_lists (account_id, name, format)
      values (${account.id}, ${`check ${format}`}, ${format}) returning id`;
    lists.push(row!.id);
  }
  await Promise.all(
    FORMATS.map(async ({ format, step }, k) => {
      const started = performance.now();
      const a = sql`'s' || (g * ${step})::text || '@check.bench.example'`;
      const value =
        format === 'md5'
          ? sql`decode(md5(${a}), 'hex')`
          : format === 'sha512'
            ? sql`sha512(convert_to(${a}, 'UTF8'))`
            : sql`convert_to(${a}, 'UTF8')`;
      await sql`
        insert into suppression_records (account_id, list_id, value)
        select ${account.id}, ${lists[k]!}, v
        from (select ${value} as v from generate_series(0, ${n - 1}::bigint) as g) as s
        order by v`;
      await sql`
        update suppression_lists set record_count = ${n}, updated_at = now()
        where account_id = ${account.id} and id = ${lists[k]!}`;
      log(
        `[suppression-check] ${format}: ${fmtInt(n)} records in ${((performance.now() - started) / 1000).toFixed(1)} s`,
      );
    }),
  );
  await sql`vacuum analyze suppression_records`;
  await sql`analyze suppression_lists`;
  return lists;
}

type Answer = { data: { email: string; suppressed: boolean; suppressionListIds: string[] }[] };

/** Every entry of an answer against the model; returns how many were suppressed. */
function verify(answer: Answer, batch: { indexes: number[]; emails: string[] }, lists: string[], n: number): number {
  if (answer.data?.length !== BATCH) throw new VerificationError(`a check answered ${answer.data?.length} entries`);
  let suppressed = 0;
  answer.data.forEach((d, k) => {
    const want = listsOf(batch.indexes[k]!, lists, n);
    const ok =
      d.email === batch.emails[k] &&
      d.suppressed === want.length > 0 &&
      JSON.stringify(d.suppressionListIds) === JSON.stringify(want);
    if (!ok)
      throw new VerificationError(`check of ${JSON.stringify(batch.emails[k])}: ${JSON.stringify(d)}, want ${want}`);
    if (d.suppressed) suppressed++;
  });
  return suppressed;
}

/** Runs `once` `requests` times, `concurrency` at a time; what it returns (the answer's check) runs untimed. */
async function timed(
  label: string,
  concurrency: number,
  requests: number,
  once: () => Promise<() => void>,
): Promise<CheckPhase> {
  const ms: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < requests) {
        const t0 = performance.now();
        const check = await once();
        ms.push(performance.now() - t0);
        check();
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  ms.sort((a, b) => a - b);
  return { label, concurrency, requests, seconds, p50: percentile(ms, 50)!, p99: percentile(ms, 99)!, max: ms.at(-1)! };
}

export async function runSuppressionCheck(
  ctx: Ctx,
  runId: string,
  rows: number,
  log: (m: string) => void,
): Promise<SuppressionCheckRun> {
  const n = Math.min(rows, MAX_RECORDS);
  const account = await createBenchAccount(ctx.sql, `${runId} suppression-check`, { attributes: [], brands: [] });
  const started = performance.now();
  const lists = await loadLists(ctx.sql, account, n, log);
  const loadSeconds = (performance.now() - started) / 1000;
  log(`[suppression-check] three lists of ${fmtInt(n)} records loaded in ${loadSeconds.toFixed(1)} s`);
  let answersChecked = 0;
  let suppressed = 0;
  const check = async () => {
    const batch = drawBatch(n);
    const res = await fetch(`${ctx.baseUrl}/v1/suppression-checks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ emails: batch.emails }),
    });
    const body = (await res.json()) as Answer;
    if (res.status !== 200) throw new VerificationError(`a check answered ${res.status}: ${JSON.stringify(body)}`);
    // Checked outside the timing: the model's answer is the bench's cost, not the service's.
    return () => {
      suppressed += verify(body, batch, lists, n);
      answersChecked += BATCH;
    };
  };
  await timed('warm-up', 1, 100, check);
  const phases = [
    await timed('HTTP, one at a time', 1, 2000, check),
    await timed('HTTP, four at a time', 4, 2000, check),
  ];
  const direct = async () => {
    const batch = drawBatch(n);
    const data = await checkAddresses(ctx.sql, account.id, batch.emails);
    return () => {
      suppressed += verify({ data }, batch, lists, n);
      answersChecked += BATCH;
    };
  };
  phases.push(await timed('the statement alone (postgres.js)', 1, 1000, direct));
  for (const p of phases)
    log(`[suppression-check] ${p.label}: p50 ${fix(p.p50, 2)} ms, p99 ${fix(p.p99, 2)} ms, max ${fix(p.max, 2)} ms`);
  return { recordsPerList: n, loadSeconds, phases, answersChecked, suppressedShare: suppressed / answersChecked };
}

export function suppressionCheckTable(run: SuppressionCheckRun): string {
  const head =
    `suppression check: 1,000 addresses a request, three lists of ${fmtInt(run.recordsPerList)} records ` +
    `(plain text, md5, sha512; loaded in ${fix(run.loadSeconds, 1)} s), ` +
    `${fix(run.suppressedShare * 100, 1)} % of ${fmtInt(run.answersChecked)} answers suppressed, every one verified`;
  const rows = run.phases.map((p) => [
    p.label,
    String(p.concurrency),
    fmtInt(p.requests),
    fix(p.requests / p.seconds, 1),
    fix(p.p50, 2),
    fix(p.p99, 2),
    fix(p.max, 2),
  ]);
  return `${head}\n${table(['checks', 'concurrency', 'requests', 'req/s', 'p50 ms', 'p99 ms', 'max ms'], rows)}`;
}

export function suppressionCheckTargets(run: SuppressionCheckRun): Target[] {
  const p = run.phases[0]!;
  const judged = run.recordsPerList >= MAX_RECORDS;
  return [
    {
      name: `suppression check of 1,000 addresses, three lists of ${fmtInt(run.recordsPerList)}, one at a time, p99`,
      value: `${fix(p.p99, 2)} ms`,
      target: `<= ${CHECK_P99_TARGET_MS} ms (at 10M records a list)`,
      pass: !judged || p.p99 <= CHECK_P99_TARGET_MS,
      judged,
    },
  ];
}

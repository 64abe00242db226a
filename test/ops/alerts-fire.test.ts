/**
 * The alerts against a real stack (issue 59): a real Prometheus scrapes a real API and worker (a
 * fault bed's processes) every second and evaluates ops/prometheus's rules every second, with every
 * `for:` shortened to 3 s and every range to 10 s (shortenedRules: the expressions stay the real ones).
 *
 * 1. Every metric name the rules and the runbook (docs/alerts.md) refer to is served by the API or
 *    the worker: the unit tests use made-up series, so a renamed metric would silence an alert.
 * 2. The worker killed during an import: WorkerHeartbeatLost and ImportStalled go pending, then
 *    firing; the worker restarted: both resolve and the import ends. PostgreSQL stopped under
 *    traffic: DatabaseCircuitOpen and ApiHighErrorRatio go pending, then firing; PostgreSQL started:
 *    both resolve. The timeline is printed.
 *
 * Redis is not killed here: while it is away each /metrics waits up to 3 s for it (SCRAPE_TIMEOUT_MS),
 * past this test's 1 s scrape timeout, so the targets would flap down; the real config's is 5 s.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort } from '../../src/embedded';
import { watchAlerts, type AlertTimeline } from '../helpers/alert-timeline';
import { faultBed, waitForImportEnd, type Child, type FaultBed } from '../helpers/fault-bed';
import { enqueue, FAULT_BED_ENV, faultCsv, midPhase, stageFaultImport } from '../helpers/fault-import';
import { createAccount, createKey } from '../helpers/fixtures';
import { RULE_FILES, RULES_DIR, shortenedRules, startPrometheus, type PrometheusServer } from '../helpers/prometheus';

let bed: FaultBed;
let api: Child;
let worker: Child;
let workerPort: number;
let prometheus: PrometheusServer;
let timeline: AlertTimeline | undefined;
let key: string;

const host = (url: string) => new URL(url).host;

/** The worker on its fixed metrics port (Prometheus's target), once its /metrics answers. */
async function startWorker(): Promise<Child> {
  const child = await bed.start('worker', { WORKER_METRICS_PORT: String(workerPort), HOST: '127.0.0.1' });
  const deadline = Date.now() + 30_000;
  while (
    !(await fetch(`http://127.0.0.1:${workerPort}/metrics`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (child.proc.exitCode !== null || Date.now() > deadline)
      throw new Error(`the worker's /metrics did not answer:\n${await bed.tail(child)}`);
    await Bun.sleep(100);
  }
  return child;
}

beforeAll(async () => {
  bed = await faultBed(FAULT_BED_ENV);
  key = await createKey(bed.sql, await createAccount(bed.sql));
  workerPort = await freePort();
  worker = await startWorker();
  api = await bed.start('api');
  const rules: Record<string, string> = {};
  for (const file of RULE_FILES) rules[file.split('/').pop()!] = shortenedRules(await readFile(file, 'utf8'));
  prometheus = await startPrometheus({
    dir: join(bed.dataDir, 'prometheus'),
    api: host(api.url!),
    worker: `127.0.0.1:${workerPort}`,
    rules,
  });
}, 60_000);

afterAll(async () => {
  await timeline?.stop();
  await prometheus?.stop();
  await bed?.stop();
});

/** Every family a /metrics serves, with the series names a histogram family stands for. */
async function servedNames(url: string): Promise<Set<string>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const names = new Set<string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name!);
    if (type === 'histogram') for (const s of ['_bucket', '_count', '_sum']) names.add(name! + s);
  }
  return names;
}

test('every metric the rules and the runbook name is served by the API or the worker', async () => {
  const served = new Set([...(await servedNames(api.url!)), ...(await servedNames(`http://127.0.0.1:${workerPort}`))]);
  const texts = await Promise.all(
    [...RULE_FILES, join(RULES_DIR, '../../docs/alerts.md')].map((f) => readFile(f, 'utf8')),
  );
  const named = new Set(texts.flatMap((t) => [...t.matchAll(/\bcontact_service_[a-z0-9_]+/g)].map((m) => m[0])));
  expect(named.size).toBeGreaterThanOrEqual(15);
  expect([...named].filter((n) => !served.has(n))).toEqual([]);
  // The gauges added for the alerts read their figures (a failed read leaves only the TYPE line).
  const apiText = await (await fetch(`${api.url}/metrics`)).text();
  const workerText = await (await fetch(`http://127.0.0.1:${workerPort}/metrics`)).text();
  expect(apiText).toMatch(/^contact_service_db_circuit_open 0$/m);
  expect(apiText).toMatch(/^contact_service_exports\{status="failed"\} 0$/m);
  expect(workerText).toMatch(/^contact_service_staging_sets\{state="free"\} 0$/m);
  // Prometheus's own `up` is the worker's heartbeat: the real server must see both targets up.
  expect(await targetsHealth()).toEqual(['contact-service-api:up', 'contact-service-worker:up']);
});

/** Each target's job and health once every target has been scraped (or after 15 s, as they are then). */
async function targetsHealth(): Promise<string[]> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const body = (await (await fetch(`${prometheus.url}/api/v1/targets`)).json()) as {
      data: { activeTargets: { labels: { job: string }; health: string }[] };
    };
    const health = body.data.activeTargets.map((t) => `${t.labels.job}:${t.health}`).sort();
    if ((health.length === 2 && health.every((h) => h.endsWith(':up'))) || Date.now() > deadline) return health;
    await Bun.sleep(250);
  }
}

/** Requests a real client would send, ten a second, so that the 5xx ratio has traffic to measure. */
function traffic(): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      await fetch(`${api.url}/v1/brands`, { headers: { authorization: `Bearer ${key}` } })
        .then((r) => r.arrayBuffer())
        .catch(() => {});
      await Bun.sleep(100);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

/**
 * pending after `since` (the fault), then firing, then, once the test has recovered the fault
 * (`recovered()`, the mark's time), resolved; firing without a break until the recovery.
 */
async function expectCycle(t: AlertTimeline, alert: string, since: number, recovered: () => number) {
  // Already pending when the fault came (ImportStalled, see below): its cycle starts there. Its state
  // at the fault, not now: waiting on another alert's cycle first, this one may have fired since.
  const atFault = t.entries.filter((e) => e.alert === alert && e.at <= since).at(-1)?.state;
  const pending = atFault === 'pending' || atFault === 'firing' ? since : await t.waitFor(alert, 'pending', since);
  const firing = atFault === 'firing' ? since : await t.waitFor(alert, 'firing', pending);
  return {
    async resolved() {
      const resolved = await t.waitFor(alert, 'resolved', Math.max(firing, recovered()));
      const between = t.entries.filter((e) => e.alert === alert && e.at > firing && e.at < resolved);
      expect(between, `${alert} did not stay firing until the recovery`).toEqual([]);
      return resolved;
    },
  };
}

test('the worker killed mid-import and PostgreSQL stopped fire their alerts, resolved after recovery', async () => {
  const load = traffic();
  const t = (timeline = watchAlerts(prometheus));
  try {
    // A healthy stack first: both targets up, and no alert pending or firing (a Prometheus that has
    // not scraped the worker yet holds WorkerHeartbeatLost pending on `absent(up)`).
    expect(await targetsHealth()).toEqual(['contact-service-api:up', 'contact-service-worker:up']);
    await t.quiet();
    t.mark('stack healthy, no alert active');
    // Staged now, not before: the worker's upload sweep starts an uploaded import by itself.
    const staged = await stageFaultImport(bed, faultCsv());
    await enqueue(bed, staged.accountId, staged.importId);
    await midPhase(bed.sql, staged.importId, 'merge');
    // Nothing fires on a healthy stack with an import moving. ImportStalled alone may be pending: an
    // import that has just started has moved no row in the test's 10 s window until its first merge
    // batch is scraped (the real rule's 5 m window and 10 m `for` leave no such gap).
    expect([...t.active()].filter(([alert, state]) => state === 'firing' || alert !== 'ImportStalled')).toEqual([]);

    await bed.kill(worker);
    t.mark('worker killed (SIGKILL) during the merge');
    const killed = t.entries.at(-1)!.at;
    let restartedAt = Infinity;
    const heartbeat = await expectCycle(t, 'WorkerHeartbeatLost', killed, () => restartedAt);
    const stalled = await expectCycle(t, 'ImportStalled', killed, () => restartedAt);
    expect(t.active().has('DatabaseCircuitOpen')).toBe(false);
    worker = await startWorker();
    t.mark('worker restarted');
    restartedAt = t.entries.at(-1)!.at;
    await heartbeat.resolved();
    await stalled.resolved();
    const end = await waitForImportEnd(bed.sql, staged.accountId, staged.importId);
    expect(end.status).toBe('success');
    t.mark('import success');

    await bed.stopPostgres();
    t.mark('PostgreSQL stopped (immediate)');
    const stopped = t.entries.at(-1)!.at;
    let startedAt = Infinity;
    const circuit = await expectCycle(t, 'DatabaseCircuitOpen', stopped, () => startedAt);
    const errors = await expectCycle(t, 'ApiHighErrorRatio', stopped, () => startedAt);
    await bed.startPostgres();
    t.mark('PostgreSQL started');
    startedAt = t.entries.at(-1)!.at;
    await circuit.resolved();
    await errors.resolved();
    expect(t.active().has('ImportStalled')).toBe(false);
  } catch (e) {
    console.error(`worker log:\n${await bed.tail(worker)}\napi log:\n${await bed.tail(api, 15)}`);
    throw e;
  } finally {
    await load.stop();
    await t.stop();
    console.log(`alert timeline (seconds since the watch began):\n${t.lines().join('\n')}`);
  }
}, 120_000);

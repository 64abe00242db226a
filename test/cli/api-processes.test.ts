/**
 * API_PROCESSES (issue 59): `bun run api` (src/cli/api.ts, the image's default command) runs that
 * many API processes on one port. Both answer requests sent to the shared port, each with its part
 * of DATABASE_POOL_SIZE and its own /metrics; one SIGKILLed leaves the other answering every
 * request while the supervisor starts it again; SIGTERM drains them all and the launcher exits 0;
 * a launcher SIGKILLed leaves none of them behind.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { join, resolve } from 'node:path';
import { freePort } from '../../src/embedded';
import { faultBed, type FaultBed } from '../helpers/fault-bed';
import { until } from '../helpers/fault-import';
import { processExists as alive } from '../helpers/process-exists';

const ROOT = resolve(import.meta.dir, '../..');

let bed: FaultBed;
beforeAll(async () => {
  bed = await faultBed();
}, 60_000);
afterAll(async () => {
  await bed?.stop();
});

/** A free port whose next one is free too (the two processes' metrics ports). */
async function twoFreePorts(): Promise<number> {
  for (;;) {
    const port = await freePort();
    try {
      Bun.serve({ port: port + 1, hostname: '0.0.0.0', fetch: () => new Response() }).stop(true);
      return port;
    } catch {
      // taken: another
    }
  }
}

/** Everything a process writes to stdout and stderr, as it comes. */
function capture(proc: { stdout: ReadableStream<Uint8Array>; stderr: ReadableStream<Uint8Array> }) {
  const out = { text: '' };
  for (const stream of [proc.stdout, proc.stderr]) {
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of stream) out.text += decoder.decode(chunk, { stream: true });
    })();
  }
  return out;
}

/** /healthz requests each on a new connection (the kernel picks a process per connection): their statuses. */
async function healthzOnNewConnections(base: string, n: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await fetch(`${base}/healthz`, { headers: { connection: 'close' } }).then(
      (res) => res.status,
      () => 0,
    );
    statuses.push(r);
  }
  return statuses;
}

/** /healthz requests one process has answered, by its own /metrics port. */
async function healthzCount(metricsPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  let n = 0;
  for (const line of text.split('\n'))
    if (line.startsWith('contact_service_http_requests_total{') && line.includes('route="/healthz"'))
      n += Number(line.split(' ').at(-1));
  return n;
}

/** `bun run api` with API_PROCESSES=2 on the bed, at `port`, their own metrics at metricsPort and the next. */
function launch(port: number, metricsPort: number) {
  return Bun.spawn([process.execPath, 'src/cli/api.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: bed.databaseUrl,
      REDIS_URL: bed.redisUrl,
      PORT: String(port),
      API_PROCESSES: '2',
      API_METRICS_PORT: String(metricsPort),
      DATABASE_POOL_SIZE: '10',
      DATA_DIR: join(bed.dataDir, 'api'),
      LOG_LEVEL: 'info',
    },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
}

test('two API processes share the port; one killed leaves the other answering; SIGTERM drains all', async () => {
  const port = await freePort();
  const metricsPort = await twoFreePorts();
  const base = `http://127.0.0.1:${port}`;
  const proc = launch(port, metricsPort);
  const log = capture(proc);
  const pidOf = (name: string) =>
    Number([...log.text.matchAll(new RegExp(`${name} started \\(pid (\\d+)\\)`, 'g'))].at(-1)?.[1] ?? NaN);
  const seen = new Set<number>();
  try {
    await until(
      'both API processes to listen',
      async () => log.text.split('"msg":"api listening"').length - 1 >= 2,
      60_000,
    );
    // Each holds half the pool size and says which of the two it is.
    expect(log.text).toMatch(/"msg":"api listening".*"process":0,"of":2,"poolSize":5/);
    expect(log.text).toMatch(/"msg":"api listening".*"process":1,"of":2,"poolSize":5/);
    const [first, second] = [pidOf('api-0'), pidOf('api-1')];
    for (const pid of [first, second]) seen.add(pid);

    // Both answer through the one port: each process's own /metrics counts its share.
    const before = [await healthzCount(metricsPort), await healthzCount(metricsPort + 1)];
    expect(await healthzOnNewConnections(base, 200)).toEqual(Array(200).fill(200));
    const after = [await healthzCount(metricsPort), await healthzCount(metricsPort + 1)];
    const served = [after[0]! - before[0]!, after[1]! - before[1]!];
    expect(served[0]).toBeGreaterThan(0);
    expect(served[1]).toBeGreaterThan(0);
    expect(served[0]! + served[1]!).toBe(200);

    // One killed: the other answers every request, before and while the supervisor restarts it.
    process.kill(first, 'SIGKILL');
    await until('api-0 to be gone', async () => !alive(first), 10_000);
    expect(await healthzOnNewConnections(base, 100)).toEqual(Array(100).fill(200));
    const restarted = await until(
      'api-0 restarted',
      async () => (pidOf('api-0') !== first ? pidOf('api-0') : undefined),
      30_000,
    );
    seen.add(restarted);
    expect(log.text).toContain(`api-0 (pid ${first}) died: killed by SIGKILL`);
    expect(alive(second)).toBe(true);
    // The restarted process takes its share again.
    await until('the restarted api-0 to serve', async () => {
      const was = await healthzCount(metricsPort);
      await healthzOnNewConnections(base, 20);
      return (await healthzCount(metricsPort)) > was;
    });

    proc.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
    for (const pid of seen) expect(alive(pid)).toBe(false);
    expect(
      await fetch(`${base}/healthz`).then(
        () => 'answered',
        () => 'refused',
      ),
    ).toBe('refused');
  } finally {
    if (proc.exitCode === null) proc.kill('SIGKILL');
    for (const pid of seen) if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
}, 90_000);

test('a launcher SIGKILLed leaves no API process behind', async () => {
  const port = await freePort();
  const proc = launch(port, await twoFreePorts());
  const log = capture(proc);
  const pids: number[] = [];
  try {
    await until('both API processes to listen', async () => log.text.split('"msg":"api listening"').length - 1 >= 2);
    for (const name of ['api-0', 'api-1'])
      pids.push(Number(new RegExp(`${name} started \\(pid (\\d+)\\)`).exec(log.text)![1]));
    proc.kill('SIGKILL');
    await until('both API processes to stop', async () => pids.every((pid) => !alive(pid)), 15_000);
    expect(
      await fetch(`http://127.0.0.1:${port}/healthz`).then(
        () => 'answered',
        () => 'refused',
      ),
    ).toBe('refused');
  } finally {
    if (proc.exitCode === null) proc.kill('SIGKILL');
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
}, 60_000);

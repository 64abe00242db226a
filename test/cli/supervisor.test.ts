/**
 * The embedded supervisor (issue "Hardening", build 6): the stack started the way `npm start`
 * starts it (src/cli/start.ts, here over a fault bed's PostgreSQL and Redis and a free port)
 * restarts a worker and an API that were SIGKILLed, says why, and the API answers again; SIGTERM
 * stops the whole stack and leaves no child behind.
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

test('npm start restarts a SIGKILLed worker and API and says why; SIGTERM stops the whole stack', async () => {
  const port = await freePort();
  const base = `http://localhost:${port}`;
  const proc = Bun.spawn([process.execPath, 'src/cli/start.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: bed.databaseUrl,
      REDIS_URL: bed.redisUrl,
      PORT: String(port),
      DATA_DIR: join(bed.dataDir, 'start'),
      LOG_LEVEL: 'info',
      // One API process named `api` (API_PROCESSES of them: test/cli/api-processes.test.ts).
      API_PROCESSES: '1',
    },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const log = capture(proc);
  const pidOf = (name: string) =>
    Number([...log.text.matchAll(new RegExp(`\\[start\\] ${name} started \\(pid (\\d+)\\)`, 'g'))].at(-1)?.[1] ?? NaN);
  const seen = new Set<number>();
  try {
    await until('the stack to be up', async () => log.text.includes('Contact service is up.'), 60_000);

    // The stack is up once the API answers; the worker may still be connecting. Killed before it
    // says it started, it would say so only once, after its restart.
    await until('the first worker to run', async () => log.text.includes('"msg":"worker started"'), 30_000);
    for (const name of ['worker', 'api']) {
      const first = pidOf(name);
      seen.add(first);
      process.kill(first, 'SIGKILL');
      const next = await until(
        `${name} restarted`,
        async () => (pidOf(name) !== first ? pidOf(name) : undefined),
        30_000,
      );
      seen.add(next);
      expect(log.text).toContain(`${name} (pid ${first}) died: killed by SIGKILL`);
      expect(alive(next)).toBe(true);
    }
    await until('the restarted API to answer', async () => (await fetch(`${base}/healthz`)).ok, 30_000);
    await until(
      'the restarted worker to run',
      async () => log.text.split('"msg":"worker started"').length - 1 >= 2,
      30_000,
    );
    expect(alive(proc.pid)).toBe(true);

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
}, 120_000);

/**
 * Container HEALTHCHECK for both roles of the one image. The API answers /healthz; the worker
 * serves no HTTP and proves liveness by the heartbeat file it touches every few seconds.
 *
 * Each role is judged by its own sign only. A worker that never started must not be reported
 * healthy because an API on the same host network (or pod) answers /healthz, nor an API because a
 * worker sharing its data volume touched the heartbeat. The role is the container's command: PID 1
 * is `bun run worker` for the worker (the image's ENTRYPOINT and CMD), anything else is the API. An
 * explicit `api` or `worker` argument overrides it.
 */
import { readFile, stat } from 'node:fs/promises';
import { loadConfig } from '../config';

type Role = 'api' | 'worker';

async function roleOfContainer(): Promise<Role> {
  const arg = process.argv[2];
  if (arg === 'api' || arg === 'worker') return arg;
  const pid1 = await readFile('/proc/1/cmdline', 'utf8').then(
    (text) => text.split('\0'),
    () => [] as string[],
  );
  return pid1.some((a) => a === 'worker' || a.endsWith('worker/index.ts')) ? 'worker' : 'api';
}

async function workerAlive(dataDir: string): Promise<boolean> {
  return stat(`${dataDir}/worker-heartbeat`).then(
    (s) => Date.now() - s.mtimeMs < 60_000,
    () => false,
  );
}

async function apiAlive(port: number): Promise<boolean> {
  return fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(4000) }).then(
    (r) => r.ok,
    () => false,
  );
}

const config = loadConfig();
const healthy =
  (await roleOfContainer()) === 'worker' ? await workerAlive(config.dataDir) : await apiAlive(config.port);
process.exit(healthy ? 0 : 1);

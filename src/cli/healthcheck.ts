/**
 * Container HEALTHCHECK for both roles: the API answers /healthz; the worker proves liveness by the
 * heartbeat file it touches every few seconds (it serves no HTTP).
 */
import { stat } from 'node:fs/promises';
import { loadConfig } from '../config';

const config = loadConfig();
const heartbeat = `${config.dataDir}/worker-heartbeat`;
const workerAlive = await stat(heartbeat).then(
  (s) => Date.now() - s.mtimeMs < 60_000,
  () => false,
);
if (workerAlive) process.exit(0);
const ok = await fetch(`http://127.0.0.1:${config.port}/healthz`, { signal: AbortSignal.timeout(4000) }).then(
  (r) => r.ok,
  () => false,
);
process.exit(ok ? 0 : 1);

import { loadConfigOrExit } from './config';
import { type NodeAddress, apiPoolSize, connect, DatabaseCircuit, probeReconnectDelaySeconds } from './db';
import { errorFields, log, setLogLevel } from './log';
import { serveApi } from './http/server';
import { resolveDatabaseUrl, resolveRedisUrl } from './embedded/urls';
import { createStore } from './storage';
import { createImportQueue } from './imports/bullmq-queue';
import { ApiLoadSignal } from './imports/api-load';
import { EventsCommittedHint } from './events/wake';
import { migrate } from './migrate';
import { closeAndExit, onStopSignals } from './shutdown';
import { RateLimiter } from './ratelimit/limiter';
import { RedisRateLimitStore } from './ratelimit/store';
import { apiMetrics } from './metrics/api';
import { serveMetrics } from './metrics/listener';
import { exitOnEscapedErrors } from './escaped-errors';

exitOnEscapedErrors('api');

const config = loadConfigOrExit();
setLogLevel(config.logLevel);

const db = await resolveDatabaseUrl(config);
const redis = await resolveRedisUrl(config);
// The circuit probes on a connection of its own, so a probe never waits behind requests in the pool,
// and soon after a failed round of connection attempts (probeReconnectDelaySeconds: a short pause, so
// that it does not hammer a standby during a failover, nor delay recovery).
const probe = connect(db.url, 1, {
  appName: config.appName,
  connectTimeout: 1,
  reconnectDelay: probeReconnectDelaySeconds,
});
const circuit = new DatabaseCircuit(() => probe`select 1`);
// One of a group of API processes on one port (src/cli/api-processes.ts) takes its part of the pool size.
const poolSize = apiPoolSize(config);
const sql = connect(db.url, poolSize, { appName: config.appName, onclose: () => circuit.suspect() });
// Replicas starting together are safe: migrations run under an advisory lock.
if (config.migrateOnStart) await migrate(sql, (m) => log('info', m));
const storage = await createStore(config);
const queue = createImportQueue(redis.url);
const load = new ApiLoadSignal(redis.url, config.importYieldRps);
const eventsHint = new EventsCommittedHint(redis.url);
const limiter = config.rateLimits
  ? new RateLimiter(new RedisRateLimitStore(redis.url), {
      perSecond: config.rateLimitPerSecond,
      burst: config.rateLimitBurst,
    })
  : undefined;
// Requests before Redis answers are admitted without a limit; at start that is a moment, not an outage.
if (limiter && !(await limiter.ready(2_000))) log('warn', 'rate limit store not reachable at start: no limits yet');
const stop = new AbortController();
// The contact fast path's pools to the cluster's other nodes, opened on first use (src/db/account-nodes.ts).
const nodePool = (node: NodeAddress) =>
  connect(db.url, poolSize, { appName: config.appName, node, onclose: () => circuit.suspect() });
const deps = { config, sql, storage, queue, load, eventsHint, circuit, limiter, stop: stop.signal, nodePool };
const metrics = apiMetrics(deps);
const server = serveApi(deps, undefined, metrics);
log('info', 'api listening', {
  url: `http://${config.host}:${server.port}`,
  storage: storage.driver,
  ...(config.apiProcessIndex !== undefined && { process: config.apiProcessIndex, of: config.apiProcesses, poolSize }),
});
// In a group, the shared port's /metrics reaches one process at random: each also serves its own
// on a port of its own, one scrape target per process (docs/operations.md, "Metrics").
const metricsServer =
  config.apiProcessIndex !== undefined && config.apiMetricsPort > 0
    ? serveMetrics(metrics.registry, { port: config.apiMetricsPort + config.apiProcessIndex, hostname: config.host })
    : undefined;

// Phased shutdown: stop accepting, let in-flight requests finish, then close pools.
let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  log('info', 'api shutting down', { signal });
  await server.stop(false).catch((e) => log('error', 'server stop failed', errorFields(e)));
  await metricsServer?.stop(true);
  stop.abort();
  await queue.close().catch(() => {});
  await load.close();
  await eventsHint.close();
  await limiter?.close();
  circuit.close();
  await probe.end({ timeout: 1 }).catch(() => {});
  await closeAndExit(sql, [db, redis]);
}
onStopSignals(shutdown);
// A process of a group whose launcher is gone (SIGKILL, the OOM killer) is no longer supervised nor
// drained by anyone: it stops as on SIGTERM rather than hold the shared port alone.
if (config.apiProcessIndex !== undefined) {
  const launcher = process.ppid;
  setInterval(() => {
    if (process.ppid !== launcher) void shutdown('launcher gone');
  }, 1_000).unref();
}

import { loadConfigOrExit } from './config';
import { connect } from './db';
import { buildApp } from './app';
import { errorFields, log, logRequest, setLogLevel } from './http/log';
import { factsOf } from './http/context';
import { resolveDatabaseUrl, resolveRedisUrl } from './cli/local/urls';
import { createStore } from './storage';
import { createImportQueue } from './imports/bullmq-queue';
import { uploadHandler } from './uploads';
import { migrate } from './migrate';

const config = loadConfigOrExit();
setLogLevel(config.logLevel);

const db = await resolveDatabaseUrl(config);
const redis = await resolveRedisUrl(config);
const sql = connect(db.url, config.databasePoolSize, { appName: config.appName });
// Replicas starting together are safe: migrations run under an advisory lock.
if (config.migrateOnStart) await migrate(sql, (m) => log('info', m));
const storage = await createStore(config);
const queue = createImportQueue(redis.url);
const deps = { config, sql, storage, queue };
const app = buildApp(deps);
const uploads = uploadHandler(deps);

// Bun's own body limit is lifted so the upload handler answers oversize files with S3's XML
// EntityTooLarge; uploads are bounded there (5 GB) and JSON bodies in readJsonBody.
const server = Bun.serve({
  port: config.port,
  hostname: config.host,
  maxRequestBodySize: Number.MAX_SAFE_INTEGER,
  idleTimeout: 0,
  async fetch(request) {
    const started = performance.now();
    const path = new URL(request.url).pathname;
    const response = path.startsWith('/uploads/') ? await uploads(request) : await app.handle(request);
    const facts = factsOf(request);
    const requestId = facts?.id ?? request.headers.get('x-request-id') ?? crypto.randomUUID();
    response.headers.set('x-request-id', requestId);
    if (path !== '/healthz' && path !== '/readyz') {
      logRequest({
        requestId,
        method: request.method,
        route: facts?.route ?? (path.startsWith('/uploads/') ? '/uploads/:token' : 'unmatched'),
        status: response.status,
        durationMs: Math.round((performance.now() - started) * 100) / 100,
      });
    }
    return response;
  },
});
log('info', 'api listening', { url: `http://${config.host}:${server.port}`, storage: storage.driver });

// Phased shutdown: stop accepting, let in-flight requests finish, then close pools.
let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  log('info', 'api shutting down', { signal });
  await server.stop(false).catch((e) => log('error', 'server stop failed', errorFields(e)));
  await queue.close().catch(() => {});
  await sql.end({ timeout: 5 }).catch(() => {});
  await db.stop();
  await redis.stop();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

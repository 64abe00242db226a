import { loadConfigOrExit } from './config';
import { connect } from './db';
import { errorFields, log, setLogLevel } from './log';
import { serveApi } from './http/server';
import { resolveDatabaseUrl, resolveRedisUrl } from './embedded/urls';
import { createStore } from './storage';
import { createImportQueue } from './imports/bullmq-queue';
import { ApiLoadSignal } from './imports/api-load';
import { migrate } from './migrate';
import { closeAndExit, onStopSignals } from './shutdown';

const config = loadConfigOrExit();
setLogLevel(config.logLevel);

const db = await resolveDatabaseUrl(config);
const redis = await resolveRedisUrl(config);
const sql = connect(db.url, config.databasePoolSize, { appName: config.appName });
// Replicas starting together are safe: migrations run under an advisory lock.
if (config.migrateOnStart) await migrate(sql, (m) => log('info', m));
const storage = await createStore(config);
const queue = createImportQueue(redis.url);
const load = new ApiLoadSignal(redis.url, config.importYieldRps);
const deps = { config, sql, storage, queue, load };
const server = serveApi(deps);
log('info', 'api listening', { url: `http://${config.host}:${server.port}`, storage: storage.driver });

// Phased shutdown: stop accepting, let in-flight requests finish, then close pools.
let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  log('info', 'api shutting down', { signal });
  await server.stop(false).catch((e) => log('error', 'server stop failed', errorFields(e)));
  await queue.close().catch(() => {});
  await load.close();
  await closeAndExit(sql, [db, redis]);
}
onStopSignals(shutdown);

/**
 * `bun run api` (the image's default command): the API on every core. With API_PROCESSES 1 (or
 * when this process is itself one of a group) it is the API process (src/index.ts); otherwise it
 * resolves the database and Redis (embedded ones started here, as `npm start` does), migrates once,
 * and supervises API_PROCESSES API processes on one port (src/cli/api-processes.ts): one that dies
 * is started again (src/cli/supervise.ts), and SIGTERM or SIGINT drains them all, each finishing
 * its requests, before this process exits 0.
 */
import { loadConfigOrExit } from '../config';
import { connect } from '../db';
import { resolveDatabaseUrl, resolveRedisUrl } from '../embedded/urls';
import { errorFields, log } from '../log';
import { migrate } from '../migrate';
import { apiProcessSpecs } from './api-processes';
import { childEnv } from './child-env';
import { onStopSignals } from '../shutdown';
import { Supervisor } from './supervise';

const config = loadConfigOrExit();
if (config.apiProcesses === 1 || config.apiProcessIndex !== undefined) {
  await import('../index');
} else {
  await superviseGroup();
}

async function superviseGroup(): Promise<void> {
  const say = (msg: string) => log('info', msg);
  const db = await resolveDatabaseUrl(config, say);
  const redis = await resolveRedisUrl(config, say);
  const supervisor = new Supervisor(say);
  let stopping = false;
  const stop = async (signal: string, code = 0) => {
    if (stopping) return;
    stopping = true;
    say(`api processes stopping (${signal})`);
    await supervisor.stop();
    await redis.stop();
    await db.stop();
    process.exit(code);
  };
  onStopSignals(stop);
  if (config.migrateOnStart) {
    const sql = connect(db.url, 1, { appName: config.appName });
    try {
      await migrate(sql, say);
    } catch (e) {
      log('error', 'migrations failed; no API process started', errorFields(e));
      await stop('migration failure', 1);
    } finally {
      await sql.end({ timeout: 5 });
    }
  }
  const env = childEnv(process.env, config, { database: db.url, redis: redis.url });
  for (const spec of apiProcessSpecs(config, env)) supervisor.start(spec);
}

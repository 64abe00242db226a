/**
 * `npm start`: the whole service on embedded defaults. Starts (or reuses) PostgreSQL and Redis when
 * no DATABASE_URL / REDIS_URL is configured, migrates, creates the demo account, runs the API and
 * the worker as supervised child processes (a child that dies is started again, see supervise.ts;
 * API_PROCESSES API processes on one port, src/cli/api-processes.ts), says the stack is up once the
 * API answers and the worker takes imports (on a cluster: with its first staging set made, so that
 * the first import runs as fast as any later one), and stops everything it started on Ctrl-C /
 * SIGTERM, and only then.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { loadConfigOrExit } from '../config';
import { connect } from '../db';
import { migrate } from '../migrate';
import { runDemo } from './admin/demo';
import { resolveDatabaseUrl, resolveRedisUrl } from '../embedded/urls';
import { Supervisor } from './supervise';
import { childEnv } from './child-env';
import { apiProcessSpecs } from './api-processes';

const say = (msg: string) => console.error(`[start] ${msg}`);

const config = loadConfigOrExit();

const db = await resolveDatabaseUrl(config, say);
const redis = await resolveRedisUrl(config, say);
const supervisor = new Supervisor(say);
let stopping = false;

async function stopAll(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    say('stopping…');
    await supervisor.stop();
    await redis.stop().catch((e) => say(`redis stop failed: ${e}`));
    await db.stop().catch((e) => say(`postgres stop failed: ${e}`));
    say('stopped');
  }
  process.exit(code);
}
process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));

async function prepareDatabase() {
  const sql = connect(db.url, 2);
  try {
    await migrate(sql, say);
    return await runDemo(sql);
  } finally {
    await sql.end();
  }
}
const demo = await prepareDatabase().catch(async (e) => {
  say(`start-up failed: ${e instanceof Error ? e.message : e}`);
  return stopAll(1);
});

const env = childEnv(process.env, config, { database: db.url, redis: redis.url });
const spawnedAt = Date.now();
for (const spec of apiProcessSpecs(config, env)) supervisor.start(spec);
supervisor.start({ name: 'worker', cmd: [process.execPath, 'worker/index.ts'], env });

const base = `http://localhost:${config.port}`;
const apiHealthy = () =>
  fetch(`${base}/healthz`).then(
    (r) => r.ok,
    () => false,
  );
// The worker beats (worker/index.ts) once it takes imports.
const workerStarted = () =>
  stat(join(config.dataDir, 'worker-heartbeat')).then(
    (s) => s.mtimeMs >= spawnedAt,
    () => false,
  );
for (const [what, ready, seconds] of [
  ['the API did not become healthy', apiHealthy, 30],
  ['the worker did not start taking imports', workerStarted, 180],
] as const) {
  for (let i = 0; !(await ready()); i++) {
    if (i > seconds * 10) {
      say(`${what} within ${seconds} s`);
      await stopAll(1);
    }
    await Bun.sleep(100);
  }
}

console.log(
  [
    '',
    'Contact service is up.',
    `  Base URL:    ${base}`,
    `  API key:     ${demo.key}`,
    `  Swagger UI:  ${base}/docs`,
    `  OpenAPI:     ${base}/docs/json`,
    `  Account:     ${demo.accountId}`,
    '',
    `Try: curl -H "Authorization: Bearer ${demo.key}" ${base}/v1/brands`,
    'Demo data:',
    JSON.stringify(demo),
    'Press Ctrl-C to stop.',
    '',
  ].join('\n'),
);

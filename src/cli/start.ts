/**
 * `npm start`: the whole service on embedded defaults. Starts (or reuses) PostgreSQL and Redis when
 * no DATABASE_URL / REDIS_URL is configured, migrates, creates the demo account, runs the API and
 * the worker as supervised child processes (a child that dies is started again, see supervise.ts),
 * and stops everything it started on Ctrl-C / SIGTERM, and only then.
 */
import { loadConfigOrExit } from '../config';
import { connect } from '../db';
import { migrate } from '../migrate';
import { runDemo } from './admin/demo';
import { resolveDatabaseUrl, resolveRedisUrl } from '../embedded/urls';
import { Supervisor } from './supervise';
import { childEnv } from './child-env';

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
for (const [name, entry] of [
  ['api', 'src/index.ts'],
  ['worker', 'worker/index.ts'],
] as const) {
  supervisor.start({ name, cmd: [process.execPath, entry], env });
}

const base = `http://localhost:${config.port}`;
for (let i = 0; ; i++) {
  const ok = await fetch(`${base}/healthz`).then(
    (r) => r.ok,
    () => false,
  );
  if (ok) break;
  if (i > 300) {
    say('the API did not become healthy within 30 s');
    await stopAll(1);
  }
  await Bun.sleep(100);
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

/**
 * The whole test suite, in two passes. Each starts (or reuses) the database and Redis through the
 * same mechanism as `start`, runs `bun test` with their URLs, and stops what it started.
 *
 * 1. Every test file of test/ and bench/ on one PostgreSQL.
 * 2. The contract files (contacts, brands, suppression, imports, events, webhooks), the cache test
 *    (its app connected to a worker) and test/cluster/ again on an embedded Citus cluster, a
 *    coordinator and 2 workers (README "Scaling out"); Citus is built from ../shared/vendor when
 *    PostgreSQL lacks it (CITUS_SRC).
 *
 * Arguments (a file name, `-t pattern`) narrow the run to one pass: the cluster's when CITUS_WORKERS
 * is set (`CITUS_WORKERS=2 bun test/run.ts test/brands.test.ts`), else the plain one.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { VENDORED_CITUS_SRC } from '../src/embedded/citus';
import { startTestServices, testServicesEnv } from './helpers/services';

const ROOT = resolve(import.meta.dir, '..');
/** The files whose every test runs on the cluster too: the contract's, the events' (issue 36), the caches'. */
const CONTRACT = /^(contacts-|brands|suppression|imports-|event-|webhook-|cache\.test)/;

const files = (dir: string, keep: (f: string) => boolean = () => true) =>
  readdirSync(join(ROOT, dir))
    .filter((f) => f.endsWith('.test.ts') && keep(f))
    .sort()
    .map((f) => `./${dir}/${f}`);

async function pass(env: Record<string, string>, args: string[]): Promise<number> {
  const withEnv = { ...process.env, ...env } as Record<string, string>;
  const services = await withProcessEnv(env, () => startTestServices((m) => console.error(m)));
  try {
    const proc = Bun.spawn([process.execPath, 'test', '--timeout', '120000', ...args], {
      stdio: ['inherit', 'inherit', 'inherit'],
      env: { ...withEnv, ...testServicesEnv(services) },
    });
    return await proc.exited;
  } finally {
    await services.stop();
  }
}

/** startTestServices reads its configuration from process.env. */
async function withProcessEnv<T>(env: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const before = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(before)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

const args = process.argv.slice(2);
const cluster: Record<string, string> = {
  CITUS_WORKERS: process.env.CITUS_WORKERS ?? '2',
  ...(!process.env.CITUS_SRC && existsSync(VENDORED_CITUS_SRC) && { CITUS_SRC: VENDORED_CITUS_SRC }),
};
let code: number;
if (args.length) code = await pass(process.env.CITUS_WORKERS ? cluster : {}, args);
else {
  code = await pass({ CITUS_WORKERS: '0' }, [...files('test'), ...files('bench')]);
  const second = await pass(cluster, [...files('test', (f) => CONTRACT.test(f)), ...files('test/cluster')]);
  code ||= second;
}
process.exit(code);

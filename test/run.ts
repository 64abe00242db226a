/**
 * The whole test suite, in two passes. Each starts (or reuses) the database and Redis through the
 * same mechanism as `start`, runs `bun test` with their URLs, and stops what it started.
 *
 * 1. Every test file of test/ and bench/, at any depth, on one PostgreSQL; test/cluster/ excepted
 *    (its files need the cluster and say so).
 * 2. On an embedded Citus cluster, a coordinator and 2 workers (docs/scaling-out.md), again: the
 *    files of test/, in any folder, whose name marks them as the contract's (contacts-*, brands*,
 *    suppression*, imports-*), the events' and webhooks' (event-*, webhook-*) or the caches' (its app
 *    connected to a worker: cache.test.ts), and every file of test/cluster/. Citus is built from
 *    ../shared/vendor when PostgreSQL lacks it (CITUS_SRC).
 *
 * Arguments (files, folders, `-t pattern`) narrow the run to one pass: the cluster's when
 * CITUS_WORKERS is set (`CITUS_WORKERS=2 bun test/run.ts test/brands`), else the plain one
 * (`bun test/run.ts test/contacts`). A folder stands for its test files at any depth.
 * `bun test/run.ts --list` prints each pass's files and runs nothing.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative, resolve } from 'node:path';
import { VENDORED_CITUS_SRC } from '../src/embedded/citus';
import { startTestServices, testServicesEnv } from './helpers/services';

const ROOT = resolve(import.meta.dir, '..');
/** The names of the files whose every test runs on the cluster too (issue 36 added the events', 56 the stats'). */
const ON_CLUSTER_TOO =
  /^(contacts-|brands|suppression|imports-|event-|webhook-|cache\.test|contact-stats\.test|search-(api|property)\.)/;
const CLUSTER_DIR = join(ROOT, 'test', 'cluster');

/** Every *.test.ts under `dir` at any depth, as absolute paths (bun test reads them as files, not filters). */
const testFiles = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts') && !f.split('/').includes('node_modules'))
    .map((f) => join(dir, f))
    .sort();

const inCluster = (f: string) => f.startsWith(CLUSTER_DIR + '/');

/** The two passes' files when no argument narrows the run. */
function passFiles(): { plain: string[]; cluster: string[] } {
  const tests = testFiles(join(ROOT, 'test'));
  return {
    plain: [...tests.filter((f) => !inCluster(f)), ...testFiles(join(ROOT, 'bench'))],
    cluster: tests.filter((f) => inCluster(f) || ON_CLUSTER_TOO.test(basename(f))),
  };
}

/** The arguments for bun test: a folder becomes its test files; a `-t` pattern is left as it is. */
function expandArgs(args: string[]): string[] {
  return args.flatMap((a, i) => {
    const pattern = i > 0 && ['-t', '--test-name-pattern'].includes(args[i - 1]!);
    return !pattern && existsSync(a) && statSync(a).isDirectory() ? testFiles(resolve(a)) : [a];
  });
}

/** Each pass's report (bun's JUnit XML), read for the failures' summary at the end. */
const reports = mkdtempSync(join(tmpdir(), 'test-run-'));

async function pass(name: string, env: Record<string, string>, args: string[]): Promise<Outcome> {
  const withEnv = { ...process.env, ...env } as Record<string, string>;
  const services = await withProcessEnv(env, () => startTestServices((m) => console.error(m)));
  const report = join(reports, `${name}.xml`);
  try {
    const proc = Bun.spawn(
      [process.execPath, 'test', '--timeout', '120000', '--reporter=junit', `--reporter-outfile=${report}`, ...args],
      { stdio: ['inherit', 'inherit', 'inherit'], env: { ...withEnv, ...testServicesEnv(services) } },
    );
    return {
      name,
      code: await proc.exited,
      failures: existsSync(report) ? failuresIn(readFileSync(report, 'utf8')) : [],
    };
  } finally {
    await services.stop();
  }
}

interface Outcome {
  name: string;
  code: number;
  failures: string[];
}

/**
 * The failed tests of a JUnit report, each as `file > describe > test: first line of the message`.
 * A run's output is long and CI may show only its end, so the suite repeats them there.
 */
function failuresIn(xml: string): string[] {
  const failed: string[] = [];
  const unescape = (s: string) =>
    s
      .replace(/&#10;/g, ' ')
      .replace(/&quot;/g, '"')
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&');
  const attr = (tag: string, key: string) => unescape(new RegExp(`\\b${key}="([^"]*)"`).exec(tag)?.[1] ?? '');
  for (const m of xml.matchAll(/<testcase\b([^>]*[^/])>\s*<failure\b([^>]*)>/g)) {
    const [, testcase = '', failure = ''] = m;
    const where = [attr(testcase, 'file'), attr(testcase, 'classname'), attr(testcase, 'name')].filter(Boolean);
    failed.push(`${where.join(' > ')}: ${attr(failure, 'message').trim().slice(0, 300)}`);
  }
  return failed;
}

/** The end of the output: each pass's outcome and, by name, every test that failed. */
function summary(outcomes: Outcome[]): string {
  const lines = ['', 'test/run.ts summary:'];
  for (const { name, code, failures } of outcomes) {
    lines.push(`  ${name} pass: ${code === 0 ? 'passed' : `failed (exit ${code})`}`);
    for (const f of failures) lines.push(`    (fail) ${f}`);
    if (code !== 0 && failures.length === 0)
      lines.push('    no test failed by name: see the output above (an error outside a test?)');
  }
  return lines.join('\n');
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
if (args[0] === '--list') {
  rmSync(reports, { recursive: true, force: true });
  for (const [name, list] of Object.entries(passFiles()))
    for (const f of list) console.log(`${name}\t${relative(ROOT, f)}`);
  process.exit(0);
}
const cluster: Record<string, string> = {
  CITUS_WORKERS: process.env.CITUS_WORKERS ?? '2',
  ...(!process.env.CITUS_SRC && existsSync(VENDORED_CITUS_SRC) && { CITUS_SRC: VENDORED_CITUS_SRC }),
};
const outcomes: Outcome[] = [];
if (args.length) {
  const onCluster = Boolean(process.env.CITUS_WORKERS);
  outcomes.push(await pass(onCluster ? 'cluster' : 'plain', onCluster ? cluster : {}, expandArgs(args)));
} else {
  const { plain, cluster: onCluster } = passFiles();
  outcomes.push(await pass('plain', { CITUS_WORKERS: '0' }, plain));
  outcomes.push(await pass('cluster', cluster, onCluster));
}
rmSync(reports, { recursive: true, force: true });
console.error(summary(outcomes));
process.exit(outcomes.find((o) => o.code !== 0)?.code ?? 0);

/**
 * Debian's Prometheus for the tests of ops/prometheus/: promtool to check and unit-test the rules,
 * and a real Prometheus server on a free port with its own config and data directory, scraping a
 * stack a test started. Installed with apt-get when missing and root, as the embedded Redis gets
 * redis-server (src/embedded/redis.ts).
 */
import { closeSync, existsSync, openSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { freePort } from '../../src/embedded';
import { aptInstall, run, tail } from '../../src/embedded/ports';

/** The operator's files: scrape config, recording rules, alerting rules, promtool unit tests. */
export const RULES_DIR = resolve(import.meta.dir, '../../ops/prometheus');
export const RULE_FILES = ['recording-rules.yml', 'alerts.yml'].map((f) => join(RULES_DIR, f));

const installed = (name: string) =>
  Bun.which(name) ?? (existsSync(`/usr/bin/${name}`) ? `/usr/bin/${name}` : undefined);

let installing: Promise<void> | undefined;

/** The path of `prometheus` or `promtool` (the package `prometheus` ships both), installing it when missing. */
export async function prometheusBinary(name: 'prometheus' | 'promtool'): Promise<string> {
  if (!installed(name)) {
    if (process.getuid?.() !== 0)
      throw new Error(`${name} not found: install it (Debian/Ubuntu: sudo apt-get install -y prometheus)`);
    installing ??= (async () => {
      console.error('[prometheus] not found: apt-get install -y --no-install-recommends prometheus');
      const started = Date.now();
      await aptInstall(['--no-install-recommends', 'prometheus']);
      // The package has an init script that would start a system Prometheus on :9090 where services
      // may start (not in a container whose policy-rc.d refuses): stop it, never depend on it.
      await run(['service', 'prometheus', 'stop']);
      await run(['update-rc.d', 'prometheus', 'disable']);
      await run(['systemctl', 'disable', '--now', 'prometheus']);
      console.error(`[prometheus] installed in ${((Date.now() - started) / 1000).toFixed(1)}s`);
    })();
    await installing;
  }
  const path = installed(name);
  if (!path) throw new Error(`apt-get installed prometheus, but no ${name} is on the PATH or in /usr/bin`);
  return path;
}

/**
 * The rules with every `for:` set to `holdFor` and every range selector (`[5m]`, `[1h]`) set to
 * `range`, for a test that cannot wait the real minutes. The expressions, thresholds and labels stay
 * the real ones: only time is shortened.
 */
export function shortenedRules(text: string, holdFor = '3s', range = '10s'): string {
  return text.replace(/^(\s*for:\s*)\S+/gm, `$1${holdFor}`).replace(/\[\d+[smhdw]\]/g, `[${range}]`);
}

/** One alert as GET /api/v1/alerts lists it (pending or firing; a resolved alert is no longer listed). */
export interface ActiveAlert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
}

export interface PrometheusServer {
  url: string;
  alerts(): Promise<ActiveAlert[]>;
  stop(): Promise<void>;
}

/**
 * A Prometheus scraping the API and the worker every second and evaluating the given rule files
 * every second (their texts, written into `dir`), with its data under `dir`.
 */
export async function startPrometheus(opts: {
  dir: string;
  api: string;
  worker: string;
  rules: Record<string, string>;
}): Promise<PrometheusServer> {
  const bin = await prometheusBinary('prometheus');
  await mkdir(opts.dir, { recursive: true });
  for (const [name, text] of Object.entries(opts.rules)) await writeFile(join(opts.dir, name), text);
  // The real scrape config's job names, with the test's targets and a 1 s pace.
  const config = (await readFile(join(RULES_DIR, 'prometheus.yml'), 'utf8'))
    .replace(/scrape_interval: \S+/, 'scrape_interval: 1s')
    .replace(/evaluation_interval: \S+/, 'evaluation_interval: 1s')
    .replace(/scrape_timeout: \S+/, 'scrape_timeout: 1s')
    .replace("'api:3000'", `'${opts.api}'`)
    .replace("'worker:9464'", `'${opts.worker}'`)
    .replace(
      /^rule_files:\n(\s+- .*\n)+/m,
      `rule_files:\n${Object.keys(opts.rules)
        .map((n) => `  - ${n}\n`)
        .join('')}`,
    );
  const configFile = join(opts.dir, 'prometheus.yml');
  await writeFile(configFile, config);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const logFile = join(opts.dir, 'prometheus.log');
  const fd = openSync(logFile, 'a');
  const proc: Subprocess = Bun.spawn(
    [
      bin,
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(opts.dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--storage.tsdb.retention.time=1h',
    ],
    { cwd: opts.dir, stdin: 'ignore', stdout: fd, stderr: fd },
  );
  closeSync(fd);
  const stop = async () => {
    if (proc.exitCode === null) proc.kill('SIGTERM');
    const killer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
    await proc.exited;
    clearTimeout(killer);
  };
  const deadline = Date.now() + 30_000;
  while (
    !(await fetch(`${url}/-/ready`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`prometheus did not become ready on ${url}:\n${await tail(logFile)}`);
    }
    await Bun.sleep(100);
  }
  return {
    url,
    async alerts() {
      const body = (await (await fetch(`${url}/api/v1/alerts`)).json()) as { data: { alerts: ActiveAlert[] } };
      return body.data.alerts;
    },
    stop,
  };
}

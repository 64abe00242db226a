/**
 * The HTTP step's N-process servers (issue 59; `--api-processes N`): the API as `bun run api` runs it with
 * API_PROCESSES=N (src/cli/api.ts: N processes on one port, each with its part of the pool), and
 * the bare server likewise (bench/lib/baseline-server.ts, BASELINE_PROCESSES=N), each measured
 * against the other as the 1-process API is against the 1-process baseline. Their CPU probes are
 * the launchers, whose samples take in their children (bench/lib/cpu.ts).
 */
import { freePort } from '../../src/embedded';
import type { BenchAccount } from './account';
import type { CpuProbe } from './cpu';
import { spawnChild, stopChild, waitHealthy, type Child, type Infra } from './services';
import type { HttpTarget } from './types';

export interface ProcessGroups {
  targets: HttpTarget[];
  probes: CpuProbe[];
  stop(): Promise<void>;
}

export async function startProcessGroups(
  infra: Infra,
  account: BenchAccount,
  processes: number,
  headers: Record<string, string>,
): Promise<ProcessGroups> {
  const [apiPort, basePort] = [await freePort(), await freePort()];
  const apiUrl = `http://127.0.0.1:${apiPort}`;
  const baseUrl = `http://127.0.0.1:${basePort}`;
  const n = String(processes);
  const started: Child[] = [];
  const stop = async () => void (await Promise.all(started.map(stopChild)));
  try {
    const api = spawnChild(
      `api-${n}p`,
      'src/cli/api.ts',
      {
        DATABASE_URL: infra.databaseUrl,
        REDIS_URL: infra.redisUrl,
        DATA_DIR: infra.config.dataDir,
        PORT: String(apiPort),
        HOST: '127.0.0.1',
        PUBLIC_URL: apiUrl,
        MIGRATE_ON_START: 'false',
        APP_NAME: 'bench-api',
        API_PROCESSES: n,
        API_METRICS_PORT: '0',
      },
      infra.logDir,
    );
    started.push(api);
    const baseline = spawnChild(
      `baseline-${n}p`,
      'bench/lib/baseline-server.ts',
      {
        DATABASE_URL: infra.databaseUrl,
        BASELINE_ACCOUNT_ID: account.id,
        PORT: String(basePort),
        BASELINE_PROCESSES: n,
      },
      infra.logDir,
    );
    started.push(baseline);
    await waitHealthy(apiUrl, api, '/readyz');
    await waitHealthy(baseUrl, baseline);
    const baseName = `baseline-${processes}p` as const;
    const apiName = `api-${processes}p` as const;
    return {
      targets: [
        { name: baseName, baseUrl, headers: {} },
        { name: apiName, baseUrl: apiUrl, headers, against: baseName },
      ],
      probes: [
        { name: baseName, pid: baseline.proc.pid },
        { name: apiName, pid: api.proc.pid },
      ],
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

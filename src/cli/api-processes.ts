import { join } from 'node:path';
import type { Config } from '../config';
import type { ChildSpec } from './supervise';

const API_ENTRY = join(import.meta.dir, '..', 'index.ts');

/**
 * The API processes `npm start` and `bun run api` supervise: one plain API when API_PROCESSES is
 * 1 (as it always ran), else API_PROCESSES of them (api-0, api-1, …), each told its place with
 * API_PROCESS_INDEX so that it shares the port (SO_REUSEPORT, src/http/server.ts), takes its part
 * of DATABASE_POOL_SIZE (src/db/pool.ts apiPoolSize) and serves its own /metrics on
 * API_METRICS_PORT + its index. `env` already holds the database and Redis URLs, resolved once by
 * the launcher, which has also migrated: the group's processes do not migrate again.
 */
export function apiProcessSpecs(config: Config, env: Record<string, string | undefined>): ChildSpec[] {
  const cmd = [process.execPath, API_ENTRY];
  if (config.apiProcesses === 1) return [{ name: 'api', cmd, env }];
  return Array.from({ length: config.apiProcesses }, (_, i) => ({
    name: `api-${i}`,
    cmd,
    env: {
      ...env,
      API_PROCESSES: String(config.apiProcesses),
      API_PROCESS_INDEX: String(i),
      MIGRATE_ON_START: 'false',
    },
  }));
}

import type { Sql } from './db';
import type { Resolved } from './embedded/urls';

/**
 * Runs `stop` on SIGTERM and SIGINT: a container runtime and `npm start`'s supervisor send SIGTERM,
 * a terminal SIGINT. `stop` decides what a second signal does.
 */
export function onStopSignals(stop: (signal: string) => Promise<void>): void {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => void stop(signal));
}

/**
 * The end of every process's phased shutdown, once its own work has stopped: the database pool,
 * then the embedded services this process started (none when their URLs were configured), then
 * exit 0.
 */
export async function closeAndExit(sql: Sql, started: readonly Resolved[]): Promise<never> {
  await sql.end({ timeout: 5 }).catch(() => {});
  for (const service of started) await service.stop();
  process.exit(0);
}

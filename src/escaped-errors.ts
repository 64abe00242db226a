import { errorFields, log } from './log';

/**
 * A process in an unknown state must not go on serving: an error that no code caught (an
 * uncaughtException, an unhandledRejection) is logged as one JSON line, with the statement when a
 * database driver's own work failed (postgres.js keeps it on the error, out of its message), and the
 * process exits 1 for its supervisor to start it again (src/cli/supervise.ts, or the container's
 * restart policy). The worker's jobs pass to another worker once their locks lapse; the API's
 * clients meet its other processes meanwhile, or retry.
 */
export function exitOnEscapedErrors(role: 'api' | 'worker'): void {
  for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
    process.on(event, (e: unknown) => {
      const { code, query } = (e ?? {}) as { code?: unknown; query?: unknown };
      log('error', `${role} ${event}; exiting`, {
        ...errorFields(e),
        ...(typeof code === 'string' && { code }),
        ...(typeof query === 'string' && { query: query.trim().replace(/\s+/g, ' ').slice(0, 500) }),
      });
      process.exit(1);
    });
  }
}

import { connectBeside, type Sql } from './pool';
import { errorFields, log } from '../log';

/** Seconds before the next LISTEN attempt after `failures` failed ones in a row: 0.1 s doubling, at most 2 s. */
export function relistenDelaySeconds(failures: number): number {
  return Math.min(0.1 * 2 ** failures, 2);
}

export interface KeptListener {
  /** True while the channel is listened on (a NOTIFY sent now is received). */
  readonly listening: boolean;
  /** Stops listening for good and closes the connection. */
  end(): Promise<void>;
}

/**
 * LISTENs on `channel` on a connection of its own beside `sql` (every host of its DATABASE_URL, or
 * `node`), and keeps listening: whenever that connection is lost, it LISTENs again, and again after
 * relistenDelaySeconds while that fails, until it listens or end() is called. postgres.js's own
 * listen() re-listens from its connection's close handler only: it kept trying through a stopped
 * server (test/faults/fault-postgres-listen.test.ts), but silently, and a LISTEN refused on a
 * session that stays open (an address moved to a standby: test/faults/fault-listen-standby.test.ts)
 * was never tried again, so the notifications stopped for good. Logs once when listening is lost
 * (or its first LISTEN failed) and once when it listens again (with the last attempt's error), not
 * at each attempt.
 *
 * `onListen` runs after every successful LISTEN, the first one included: notifications sent while
 * nobody listened are lost, so this is where a listener catches up (a cache drops what it holds).
 */
export function keepListening(
  sql: Sql,
  channel: string,
  handlers: { onNotify: (payload: string) => void; onListen?: () => void },
  options: { what: string; node?: { host: string; port: number } },
): KeptListener {
  let listening = false;
  let ended = false;
  let failures = 0;
  let lostAt: number | undefined;
  /** Why the last attempt failed, told with the return (the attempts themselves are not logged). */
  let lastError: string | undefined;
  let retry: ReturnType<typeof setTimeout> | undefined;
  const fields = { channel, ...(options.node && { node: `${options.node.host}:${options.node.port}` }) };

  // A connection per round of attempts: a LISTEN refused on an open connection (a host name that
  // leads to a standby: "cannot execute LISTEN during recovery") is not tried again on that session,
  // which may never become a primary, but on a new one, which resolves the name again.
  let conn: Sql | undefined;
  const open = (): Sql => {
    const own: Sql = connectBeside(sql, options.node ?? 'own', {
      // A listening connection is idle by nature; it must never be closed for being idle or old.
      idle_timeout: null,
      max_lifetime: null,
      fetch_types: false,
      onnotify: (name: string, payload: string) => {
        if (name === channel) handlers.onNotify(payload);
      },
      // Called for every closed connection, failed attempts included; only the loss of a listening
      // connection starts a new round (a failed attempt's own rejection schedules the next one).
      onclose: () => {
        if (ended || !listening || conn !== own) return;
        listening = false;
        lostAt = Date.now();
        log('warn', `${options.what}: lost its LISTEN connection; listening again`, fields);
        schedule(0);
      },
    });
    return own;
  };

  function schedule(delaySeconds: number): void {
    retry = setTimeout(() => void attempt(), delaySeconds * 1_000);
  }

  async function attempt(): Promise<void> {
    retry = undefined;
    if (ended) return;
    const current = (conn ??= open());
    try {
      await current`listen ${current.unsafe(`"${channel.replaceAll('"', '""')}"`)}`;
    } catch (error) {
      if (ended) return;
      conn = undefined;
      lastError = error instanceof Error ? error.message : String(error);
      void current.end({ timeout: 0 }).catch(() => {});
      if (failures++ === 0 && lostAt === undefined) {
        lostAt = Date.now();
        log('warn', `${options.what}: cannot LISTEN; trying again until it can`, { ...fields, ...errorFields(error) });
      }
      return schedule(relistenDelaySeconds(failures));
    }
    if (ended) return;
    if (lostAt !== undefined)
      log('info', `${options.what}: listening again`, {
        ...fields,
        afterMs: Date.now() - lostAt,
        attempts: failures + 1,
        ...(lastError !== undefined && { lastError }),
      });
    listening = true;
    failures = 0;
    lostAt = lastError = undefined;
    handlers.onListen?.();
  }

  schedule(0);
  return {
    get listening() {
      return listening;
    },
    async end() {
      ended = true;
      listening = false;
      clearTimeout(retry);
      await conn?.end({ timeout: 1 }).catch(() => {});
    },
  };
}

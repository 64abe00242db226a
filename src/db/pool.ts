import postgres from 'postgres';
import { type Config, DEFAULT_APP_NAME } from '../config';
import { guardPinned } from './pinned';
import { trackPool } from './pool-usage';

export type Sql = postgres.Sql<{}>;
export type Tx = postgres.TransactionSql<{}>;
/** Whatever runs a statement: the pool, a transaction or a reserved connection. */
export type AnySql = postgres.ISql<{}>;

/**
 * The one postgres.js instance of a process. bigint columns (counters) come back as JS numbers:
 * every counter here stays far below 2^53. `appName` is PostgreSQL's application_name (what
 * pg_stat_activity shows; Config.appName for the API and the worker); `debug` sees every statement
 * sent (tests count round trips). Transactions and reservations are guarded against postgres.js
 * writing on a connection it already closed (src/db/pinned.ts), and what holds a pool connection is
 * counted for the pool gauges of /metrics (src/db/pool-usage.ts).
 */
export function connect(
  url: string,
  max = 10,
  options: {
    appName?: string;
    debug?: (connection: number, query: string, params: unknown[]) => void;
    /** Called whenever one of the pool's connections closes (the API's circuit probes the database then). */
    onclose?: () => void;
    /** Seconds a connection attempt may take (10 unless given; the circuit's probe uses 1). */
    connectTimeout?: number;
    /** Seconds before connecting again after `failures` failed attempts (reconnectDelaySeconds unless given). */
    reconnectDelay?: (failures: number) => number;
    /** Another server than the URL's, with the URL's credentials and database (a node of a Citus cluster). */
    node?: { host: string; port: number };
  } = {},
): Sql {
  const sql = postgres(url, {
    max,
    ...(options.node && { host: options.node.host, port: options.node.port }),
    ...(options.debug && { debug: options.debug }),
    ...(options.onclose && { onclose: options.onclose }),
    idle_timeout: 30,
    connect_timeout: options.connectTimeout ?? 10,
    backoff: options.reconnectDelay ?? reconnectDelaySeconds,
    onnotice: () => {},
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
    connection: { application_name: options.appName ?? DEFAULT_APP_NAME },
  }) as unknown as Sql;
  return trackPool(guardPinned(sql), max);
}

/**
 * A connection of its own beside `sql`, to `node`: the pool's options (credentials, database, TLS)
 * with the node's address, as postgres.js makes its own listen connection, without the pool's hooks
 * (statement log, close callback) and outside its place count. For what must neither take a place
 * in an app's pool nor show among its statements: listeners, lookups. `'own'`: to the pool's own
 * servers, every host of a DATABASE_URL that names several, chosen by its target_session_attrs as
 * the pool chooses; its first host alone may be a primary that failed over, or a standby.
 */
export function connectBeside(
  sql: Sql,
  node: { host: string; port: number } | 'own',
  extra: {
    idle_timeout?: number | null;
    max_lifetime?: number | null;
    fetch_types?: boolean;
    onnotify?: (channel: string, payload: string) => void;
    onclose?: () => void;
  } = {},
) {
  return postgres({
    ...sql.options,
    ...(node !== 'own' && { host: [node.host], port: [node.port] }),
    max: 1,
    debug: false,
    onclose: undefined,
    ...extra,
  } as never) as unknown as Sql;
}

/**
 * Seconds a pool connection waits before it connects again after a failed or broken connection,
 * while a statement waits parked on it. postgres.js's default grows with a failure count shared by
 * the whole pool, up to 20 s: an immediate restart (every connection broken, then refused and
 * 'starting up' for a second) left requests parked for 5 to 13 s after PostgreSQL was back. A
 * refused attempt costs the server nothing, so at most one a second per connection.
 */
export function reconnectDelaySeconds(failures: number): number {
  return Math.min(0.05 * 2 ** failures, 1);
}

/**
 * Connections of one API process's pool: DATABASE_POOL_SIZE for an API that runs alone, and for
 * each of a group of API_PROCESSES on one port (src/cli/api-processes.ts) its part of it, at least
 * 2, so that a host's API opens about as many connections with one process as with one per core
 * and the sum stays within what the database allows (docs/configuration.md, "Connections").
 */
export function apiPoolSize(config: Pick<Config, 'databasePoolSize' | 'apiProcesses' | 'apiProcessIndex'>): number {
  if (config.apiProcessIndex === undefined) return config.databasePoolSize;
  return Math.max(2, Math.floor(config.databasePoolSize / config.apiProcesses));
}

import { resolve } from 'node:path';
import { availableCores } from './cpu-cores';

/** Everything the processes read from the environment, parsed once at start-up. */
export interface Config {
  readonly port: number;
  readonly host: string;
  /** Base URL clients reach the API at; upload links of the local store point here. */
  readonly publicUrl: string;
  readonly databaseUrl: string | undefined;
  readonly redisUrl: string | undefined;
  readonly dataDir: string;
  /**
   * Without DATABASE_URL: how many Citus workers the embedded database has (0: one plain PostgreSQL;
   * N: a coordinator and N workers under DATA_DIR/citus, src/embedded/citus.ts).
   */
  readonly citusWorkers: number;
  /** A Citus release source tarball, built and installed when PostgreSQL lacks Citus. */
  readonly citusSrc: string | undefined;
  readonly docsUrl: string;
  readonly bodyLimitBytes: number;
  readonly databasePoolSize: number;
  /**
   * API processes `npm start` and `bun run api` run on one port (SO_REUSEPORT), each restarted
   * when it dies (src/cli/api-processes.ts); the machine's cores, or the container's CPU quota,
   * unless set.
   */
  readonly apiProcesses: number;
  /**
   * Set only by that launcher in each API process it starts (API_PROCESS_INDEX, 0 to
   * apiProcesses - 1): the process then shares its port and a 1/apiProcesses part of
   * DATABASE_POOL_SIZE (src/db/pool.ts apiPoolSize), and serves /metrics on a port of its own.
   */
  readonly apiProcessIndex: number | undefined;
  /** API process i of a group serves GET /metrics on this port + i too (on HOST); 0: it does not. */
  readonly apiMetricsPort: number;
  readonly storage: StorageConfig;
  readonly importBatchSize: number;
  /** Merge batches of one import in flight at once, each on its own PostgreSQL backend. */
  readonly importMergeConcurrency: number;
  /**
   * Requests a second (counted over 100 ms windows) at or above which an API process tells the workers it is busy,
   * so that imports pace themselves (src/imports/api-load.ts); 0: it never does.
   */
  readonly importYieldRps: number;
  /**
   * While the API is busy, an import's work goes in pieces (a parsed chunk, a dedupe statement, a
   * merge piece of PACED_ROWS rows) and rests this many times each piece's time after it
   * (worker/import/pace.ts); 0: imports never pace.
   */
  readonly importPace: number;
  /** Imports one worker process runs at once, side by side (worker/fair-share.ts). */
  readonly workerConcurrency: number;
  /** Port of the worker's own HTTP listener for GET /metrics (on HOST); 0: no listener. */
  readonly workerMetricsPort: number;
  readonly logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** The API applies pending migrations at start (under an advisory lock). */
  readonly migrateOnStart: boolean;
  /** PostgreSQL application_name of the process's connections. */
  readonly appName: string;
  /**
   * GET, POST and PATCH of one contact try the one-statement path first (src/contacts/fast-path.ts).
   * Off, every request takes the plain path: the test suite runs the contact files both ways.
   */
  readonly contactFastPath: boolean;
  /**
   * Imports record the rows they reject and keep a rejected-rows report of them (an extension
   * beyond the contract; worker/import/report.ts). Off, nothing is recorded and no report is made.
   */
  readonly rejectedRowsReport: boolean;
  /** Days a rejected-rows report is kept after its import finished; the sweep removes it then. */
  readonly rejectedRowsRetentionDays: number;
  /** Days a brand-subscribe event stays in the feed (GET /v1/events); the sweep removes it then. */
  readonly eventRetentionDays: number;
  /** Days a contact export's file is kept after it completed; the sweep removes it then. */
  readonly exportRetentionDays: number;
  /**
   * Milliseconds a contact search or count may run in the database before it is cancelled there and
   * answered 504 (src/search/run.ts).
   */
  readonly searchTimeoutMs: number;
  /**
   * Webhook endpoints may point at loopback, private and link-local addresses. Off by default; on
   * for the embedded default (no DATABASE_URL), where the receiver is on the developer's machine.
   */
  readonly webhookAllowPrivateUrls: boolean;
  /**
   * Requests a second per account, over all its keys and every API replica (src/ratelimit), and
   * its burst; an account's own (admin account rate-limit) replace them. `rateLimits` false: no
   * limit, no Redis connection for it, no RateLimit headers (the bench's "without").
   */
  readonly rateLimits: boolean;
  readonly rateLimitPerSecond: number;
  readonly rateLimitBurst: number;
}

export type StorageConfig =
  | { readonly driver: 'local'; readonly dir: string; readonly uploadSecret: string | undefined }
  | {
      readonly driver: 's3';
      readonly endpoint: string | undefined;
      /**
       * Endpoint that presigned links (upload and download) are signed for, when clients reach the
       * store at another address than the processes do (a compose network: docs/container.md).
       */
      readonly publicEndpoint: string | undefined;
      readonly region: string;
      readonly bucket: string;
      readonly accessKeyId: string | undefined;
      readonly secretAccessKey: string | undefined;
      readonly forcePathStyle: boolean;
      /**
       * S3_REQUEST_TIMEOUT_MS: a request's bound until its answer begins, and the longest silence in
       * a body being read before the read drops the connection and resumes (src/storage/s3-read.ts).
       */
      readonly requestTimeoutMs: number;
      /** S3_MAX_ATTEMPTS: tries of one request (the SDK's retries), and resumes of a read in a row without progress. */
      readonly maxAttempts: number;
    };

/** PostgreSQL application_name when APP_NAME is not set (and for tools that read no config). */
export const DEFAULT_APP_NAME = 'contact-service';

/**
 * Above what one account drives on one API process (~9,000 GET/s on 2 cores, bench/README.md), so
 * that no ordinary client, test or bench meets them: they stop a runaway client from taking more
 * than about two replicas' worth of a scaled-out service. docs/rate-limits.md.
 */
export const DEFAULT_RATE_LIMIT = { perSecond: 20_000, burst: 40_000 } as const;

export class ConfigError extends Error {}

function int(
  env: Record<string, string | undefined>,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function bool(env: Record<string, string | undefined>, name: string, fallback: boolean): boolean {
  const raw = env[name]?.toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes'].includes(raw)) return true;
  if (['0', 'false', 'no'].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

function nonEmpty(env: Record<string, string | undefined>, name: string): string | undefined {
  const raw = env[name]?.trim();
  return raw ? raw : undefined;
}

/** Reads and validates the environment; throws ConfigError naming the variable at fault. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const port = int(env, 'PORT', 3000, 0, 65535);
  const host = nonEmpty(env, 'HOST') ?? '0.0.0.0';
  const dataDir = resolve(nonEmpty(env, 'DATA_DIR') ?? '.data');
  const bucket = nonEmpty(env, 'S3_BUCKET');
  const driver = nonEmpty(env, 'STORAGE_DRIVER') ?? (bucket ? 's3' : 'local');
  if (driver !== 'local' && driver !== 's3')
    throw new ConfigError(`STORAGE_DRIVER must be local or s3, got "${driver}"`);
  let storage: StorageConfig;
  if (driver === 's3') {
    if (!bucket) throw new ConfigError('S3_BUCKET is required when STORAGE_DRIVER is s3');
    storage = {
      driver,
      endpoint: nonEmpty(env, 'S3_ENDPOINT'),
      publicEndpoint: nonEmpty(env, 'S3_PUBLIC_ENDPOINT'),
      region: nonEmpty(env, 'S3_REGION') ?? 'us-east-1',
      bucket,
      accessKeyId: nonEmpty(env, 'S3_ACCESS_KEY_ID'),
      secretAccessKey: nonEmpty(env, 'S3_SECRET_ACCESS_KEY'),
      forcePathStyle: bool(env, 'S3_FORCE_PATH_STYLE', true),
      requestTimeoutMs: int(env, 'S3_REQUEST_TIMEOUT_MS', 30_000, 100, 600_000),
      maxAttempts: int(env, 'S3_MAX_ATTEMPTS', 5, 1, 20),
    };
  } else {
    storage = {
      driver,
      dir: resolve(nonEmpty(env, 'STORAGE_DIR') ?? `${dataDir}/objects`),
      uploadSecret: nonEmpty(env, 'UPLOAD_SECRET'),
    };
  }
  const logLevel = (nonEmpty(env, 'LOG_LEVEL') ?? 'info') as Config['logLevel'];
  if (!['debug', 'info', 'warn', 'error'].includes(logLevel))
    throw new ConfigError(`LOG_LEVEL must be debug, info, warn or error`);
  const publicUrl = (nonEmpty(env, 'PUBLIC_URL') ?? `http://localhost:${port}`).replace(/\/+$/, '');
  return Object.freeze({
    port,
    host,
    publicUrl,
    databaseUrl: nonEmpty(env, 'DATABASE_URL'),
    redisUrl: nonEmpty(env, 'REDIS_URL'),
    dataDir,
    citusWorkers: int(env, 'CITUS_WORKERS', 0, 0, 16),
    citusSrc: nonEmpty(env, 'CITUS_SRC') && resolve(nonEmpty(env, 'CITUS_SRC')!),
    docsUrl: (nonEmpty(env, 'DOCS_URL') ?? 'https://docs.contacts.example').replace(/\/+$/, ''),
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    databasePoolSize: int(env, 'DATABASE_POOL_SIZE', 10, 1, 500),
    apiProcesses: int(env, 'API_PROCESSES', availableCores(), 1, 64),
    apiProcessIndex: nonEmpty(env, 'API_PROCESS_INDEX') ? int(env, 'API_PROCESS_INDEX', 0, 0, 63) : undefined,
    apiMetricsPort: int(env, 'API_METRICS_PORT', 9470, 0, 65535),
    storage: Object.freeze(storage),
    importBatchSize: int(env, 'IMPORT_BATCH_SIZE', 100_000, 1, 1_000_000),
    importMergeConcurrency: int(env, 'IMPORT_MERGE_CONCURRENCY', 2, 1, 8),
    importYieldRps: int(env, 'IMPORT_YIELD_RPS', 100, 0, 1_000_000),
    importPace: int(env, 'IMPORT_PACE', 4, 0, 20),
    workerConcurrency: int(env, 'WORKER_CONCURRENCY', 4, 1, 64),
    workerMetricsPort: int(env, 'WORKER_METRICS_PORT', 9464, 0, 65535),
    logLevel,
    migrateOnStart: bool(env, 'MIGRATE_ON_START', true),
    appName: nonEmpty(env, 'APP_NAME') ?? DEFAULT_APP_NAME,
    contactFastPath: bool(env, 'CONTACT_FAST_PATH', true),
    rejectedRowsReport: bool(env, 'REJECTED_ROWS_REPORT', true),
    rejectedRowsRetentionDays: int(env, 'REJECTED_ROWS_RETENTION_DAYS', 30, 1, 3650),
    eventRetentionDays: int(env, 'EVENT_RETENTION_DAYS', 7, 1, 3650),
    exportRetentionDays: int(env, 'EXPORT_RETENTION_DAYS', 7, 1, 3650),
    searchTimeoutMs: int(env, 'SEARCH_TIMEOUT_MS', 10_000, 100, 600_000),
    webhookAllowPrivateUrls: bool(env, 'WEBHOOK_ALLOW_PRIVATE_URLS', nonEmpty(env, 'DATABASE_URL') === undefined),
    rateLimits: bool(env, 'RATE_LIMITS', true),
    rateLimitPerSecond: int(env, 'RATE_LIMIT_PER_SECOND', DEFAULT_RATE_LIMIT.perSecond, 1, 10_000_000),
    rateLimitBurst: int(env, 'RATE_LIMIT_BURST', DEFAULT_RATE_LIMIT.burst, 1, 100_000_000),
  });
}

/** For process entry points: the config, or a one-line message naming the variable and exit 2. */
export function loadConfigOrExit(): Config {
  try {
    return loadConfig();
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    console.error(`configuration error: ${e.message}`);
    process.exit(2);
  }
}

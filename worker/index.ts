/**
 * The worker process: runs contact imports and the upload sweeper from BullMQ. Stateless; run as
 * many as you like. Postgres holds every state, so a killed worker loses nothing.
 */
import { DelayedError, Queue, UnrecoverableError, Worker, type Job, type Processor } from 'bullmq';
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import { loadConfigOrExit } from '../src/config';
import { connect, onCitusWorkerNode } from '../src/db';
import { errorFields, log, setLogLevel } from '../src/log';
import { ApiLoad } from '../src/imports/api-load';
import { onEventsCommitted } from '../src/events/wake';
import { createImportQueue, redisConnection } from '../src/imports/bullmq-queue';
import { markImportFailed } from '../src/imports/lifecycle';
import {
  BUSY_RECHECK_MS,
  IMPORT_JOB,
  IMPORT_LOCK_MS,
  IMPORT_LOCK_RENEW_MS,
  IMPORT_QUEUE,
  JOB_NAMES,
  STALLED_CHECK_MS,
  SUSPENDED_RECHECK_MS,
  SWEEP_JOB,
  SWEEP_QUEUE,
  type ImportJobData,
} from '../src/imports/jobs';
import { resolveDatabaseUrl, resolveRedisUrl } from '../src/embedded/urls';
import { importsFinished } from '../src/metrics/import-pipeline';
import { serveMetrics } from '../src/metrics/listener';
import { workerMetrics } from '../src/metrics/worker';
import { createStore } from '../src/storage';
import { checkWebhookUrl } from '../src/webhooks/url-safety';
import { closeAndExit, onStopSignals } from '../src/shutdown';
import { ImportBusyError, runImport } from './import/index';
import { FairShare } from './fair-share';
import { workerPoolSize } from './pool-size';
import { workerErrorLog } from './redis-loss';
import { keepSweepScheduler } from './schedulers';
import { removeStaleReportFiles } from './import/report';
import { sweep } from './sweep';
import { runLoop } from './events/loop';
import { sequenceEvents } from './events/sequencer';
import { startRelay } from './events/relay';
import { startExports } from './exports/loop';
import { stagingPoolMade, startStagingPool } from './import/staging-pool';
import { compactBusyTallies } from '../src/search/stats';
import { exitOnEscapedErrors } from '../src/escaped-errors';

exitOnEscapedErrors('worker');

const config = loadConfigOrExit();
setLogLevel(config.logLevel);
const concurrency = config.workerConcurrency;

const db = await resolveDatabaseUrl(config);
const redis = await resolveRedisUrl(config);
const poolSize = workerPoolSize(config);
if (poolSize > config.databasePoolSize)
  log('info', 'worker database pool raised to what its imports need', {
    configured: config.databasePoolSize,
    poolSize,
  });
const sql = connect(db.url, poolSize, { appName: config.appName });
// Its staging tables are Citus DDL, which only the coordinator runs, and its locks (an import's run,
// its merges, the staging pool's upkeep) must be taken where every worker process takes them.
if (await onCitusWorkerNode(sql)) {
  log('error', 'the worker connects to the coordinator of a Citus cluster, not to one of its workers', {
    hint: 'point DATABASE_URL at the coordinator (API replicas may use any node)',
  });
  process.exit(1);
}
const storage = await createStore(config);
const importQueue = createImportQueue(redis.url);
// Whether the API is busy: merges then pace themselves (src/imports/api-load.ts).
const apiLoad = config.importPace > 0 ? new ApiLoad(redis.url) : undefined;
// Imports of different accounts share the worker's places (worker/fair-share.ts).
const fairShare = new FairShare(concurrency, async () => {
  const [oldest] = await importQueue.queue.getWaiting(0, 0);
  return oldest ? Math.max(0, Date.now() - oldest.timestamp) : 0;
});

/**
 * How often the event sequencer and the webhook relay look for work unasked. Committed events wake
 * the sequencer at once (src/events/wake.ts: the API's hint through Redis, this process's merge
 * batches directly), and positions placed wake the relay, as a failed delivery does when its retry
 * is due; these looks only catch what a lost hint left (Redis away, a process killed between its
 * commit and its hint) and the other replicas' placements. On a Citus cluster each look is a query
 * over every shard: at 200 ms they cost an idle cluster about 70 ms of CPU a second.
 */
const SEQUENCE_UNHINTED_MS = 2_000;
const RELAY_UNHINTED_MS = 1_000;

// Brand-subscribe events reach the accounts' webhook endpoints (worker/events/relay.ts) once they
// have feed positions: PostgreSQL holds every state, Redis only carries hints.
const relay = startRelay(sql, {
  allowPrivate: config.webhookAllowPrivateUrls,
  checkUrl: checkWebhookUrl,
  importing: () => fairShare.importing(),
  pollMs: RELAY_UNHINTED_MS,
});
// ... which they get once committed (worker/events/sequencer.ts), woken by every hint.
const sequencer = runLoop('event sequencer', SEQUENCE_UNHINTED_MS, () => sequenceEvents(sql, () => relay.poke()));
const eventHints = onEventsCommitted(redis.url, () => sequencer.poke());

type Handler = (job: Job, token?: string) => Promise<unknown>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Every job name of every queue, mapped to exactly one handler (checked below, before any job runs). */
const handlers: Record<string, Record<string, Handler>> = {
  [IMPORT_QUEUE]: {
    [IMPORT_JOB]: async (job: Job<ImportJobData>, token?: string) => {
      const { accountId, importId } = job.data ?? {};
      // Bad input never gets better with retries.
      if (!UUID.test(accountId ?? '') || !UUID.test(importId ?? ''))
        throw new UnrecoverableError(`job ${job.id} has no valid accountId/importId`);
      const leave = fairShare.enter(importId);
      try {
        const end = await runImport(
          {
            sql,
            storage,
            config,
            log: (msg, fields) => log('info', msg, { importId, ...fields }),
            giveWay: () => fairShare.giveWay(importId),
            sharing: () => fairShare.sharing(),
            apiBusy: apiLoad && (() => apiLoad.busy()),
            apiLoad: apiLoad && (() => apiLoad.load()),
            eventsCommitted: () => sequencer.poke(),
          },
          accountId,
          importId,
        );
        if (end === 'suspended' && token) {
          // The account is suspended: the import waits, open, and is looked at again until it is not.
          await job.moveToDelayed(Date.now() + SUSPENDED_RECHECK_MS, token);
          throw new DelayedError();
        }
        if (end === 'yielded' && token) {
          // Gave its place to another account's import at a checkpoint: back of the queue, no retry
          // spent; the run that takes it up again resumes from there.
          await job.moveToDelayed(Date.now(), token);
          throw new DelayedError();
        }
      } catch (e) {
        if (e instanceof DelayedError) throw e;
        if (!(e instanceof ImportBusyError) || !token) throw e;
        // Another run holds the import's session lock: a worker whose lock lapsed while it still
        // runs, a job that Redis lost and the sweeper enqueued again, or a killed worker whose
        // last statement PostgreSQL is still finishing. Look again soon, without spending one of
        // the job's retries: their exponential backoff would leave the import idle for minutes
        // if the holder dies next.
        await job.moveToDelayed(Date.now() + BUSY_RECHECK_MS, token);
        throw new DelayedError();
      } finally {
        leave();
      }
    },
  },
  [SWEEP_QUEUE]: {
    [SWEEP_JOB]: async () => {
      const result = await sweep({ sql, storage, queue: importQueue, eventRetentionDays: config.eventRetentionDays });
      if (result.expired.length) importsFinished.inc({ status: 'failed' }, result.expired.length);
      if (Object.values(result).some((ids) => ids.length > 0)) log('info', 'upload sweep', { ...result });
      return result;
    },
  },
};

checkHandlers();

function checkHandlers(): void {
  const declared = Object.entries(JOB_NAMES)
    .flatMap(([q, names]) => names.map((n) => `${q}/${n}`))
    .sort();
  const handled = Object.entries(handlers)
    .flatMap(([q, map]) => Object.keys(map).map((n) => `${q}/${n}`))
    .sort();
  if (declared.join() !== handled.join()) {
    log('error', 'job names and handlers differ; refusing to start', { declared, handled });
    process.exit(1);
  }
}

function processorFor(queueName: string): Processor {
  const map = handlers[queueName]!;
  return async (job, token) => {
    const handler = map[job.name];
    if (!handler) throw new UnrecoverableError(`no handler for job ${job.name} on ${queueName}`);
    return handler(job, token);
  };
}

// On a Citus cluster, the staging pool made before the first import is taken: the worker says it
// has started (and beats, src/cli/healthcheck.ts) only when an import runs at full speed.
await stagingPoolMade(sql, concurrency);
const importWorker = new Worker(IMPORT_QUEUE, processorFor(IMPORT_QUEUE), {
  connection: redisConnection(redis.url),
  concurrency,
  // A killed worker's import is picked up again within seconds (see IMPORT_LOCK_MS).
  lockDuration: IMPORT_LOCK_MS,
  lockRenewTime: IMPORT_LOCK_RENEW_MS,
  stalledInterval: STALLED_CHECK_MS,
  // A job that keeps killing its worker fails after this many stalls; the sweeper then enqueues
  // it again while PostgreSQL says the import is open, so this only bounds a crash loop's pace.
  maxStalledCount: 2,
});
const sweepWorker = new Worker(SWEEP_QUEUE, processorFor(SWEEP_QUEUE), {
  connection: redisConnection(redis.url),
  concurrency: 1,
  lockDuration: 60_000,
});
for (const [name, w] of [
  ['import', importWorker],
  ['sweep', sweepWorker],
] as const) {
  w.on('failed', (job, e) =>
    log('warn', `${name} job failed`, { jobId: job?.id, attempts: job?.attemptsMade, ...errorFields(e) }),
  );
}
// A job's lock or key lost with Redis' data is expected (docs/reliability.md): a warning with what
// happens about it, not an error (worker/redis-loss.ts).
importWorker.on(
  'error',
  workerErrorLog('import', 'the import goes on against PostgreSQL and the sweep re-enqueues it if it stops'),
);
sweepWorker.on(
  'error',
  workerErrorLog('sweep', "checking that the sweep's scheduler is still in Redis", () =>
    sweepScheduler.check('a sweep job was lost'),
  ),
);
// An import whose retries are used up stops with a reason instead of holding the account's one open
// import forever (unrecoverable errors were already marked failed by the pipeline itself).
importWorker.on('failed', (job, e) => {
  const data = job?.data as ImportJobData | undefined;
  if (!job || !data || e instanceof UnrecoverableError || job.attemptsMade < (job.opts.attempts ?? 1)) return;
  const lastError = e.message.split('\n')[0]!.slice(0, 300);
  const reason = `The import stopped after ${job.attemptsMade} failed attempts; the last error was: ${lastError}`;
  markImportFailed(sql, data.accountId, data.importId, reason).then(
    () => importsFinished.inc({ status: 'failed' }),
    (err) => log('error', 'could not mark the import failed', { importId: data.importId, ...errorFields(err) }),
  );
});

const sweepConnection = redisConnection(redis.url);
const sweepQueue = new Queue(SWEEP_QUEUE, { connection: sweepConnection });
const metrics = workerMetrics(sql, [importQueue.queue, sweepQueue]);
// Attached before the first await, so a stall found by the workers' first check is counted.
for (const w of [importWorker, sweepWorker]) w.on('stalled', () => metrics.stalledJobs.inc({ queue: w.name }));
const sweepScheduler = keepSweepScheduler(sweepQueue, sweepConnection);
await sweepScheduler.started;
// Rejected-rows report files of workers killed on this machine (worker/import/report.ts).
const staleReports = await removeStaleReportFiles();
// Contact exports, under a lease on their row like the relay's endpoints (worker/exports/loop.ts),
// their COPY read at a lower rate while the API is busy (worker/exports/copy-rows.ts).
const exports = startExports(sql, storage, {
  retentionDays: config.exportRetentionDays,
  apiBusy: apiLoad && (() => apiLoad.busy()),
});
// On a Citus cluster, staging tables made ahead of the imports (worker/import/staging-pool.ts).
const stagingPool = startStagingPool(sql, concurrency);
// The contact tallies' delta rows summed, every 10 s, for accounts that are written and not read,
// whose rows would otherwise grow without bound (src/search/stats.ts).
const tallies = runLoop('contact tally compaction', 10_000, () => compactBusyTallies(sql));
log('info', 'worker started', { concurrency, storage: storage.driver, staleReportFilesRemoved: staleReports.length });
const metricsServer = serveMetrics(metrics.registry, { port: config.workerMetricsPort, hostname: config.host });
if (metricsServer)
  log('info', 'worker metrics listening', { url: `http://${config.host}:${metricsServer.port}/metrics` });

// The container HEALTHCHECK (src/cli/healthcheck.ts) reads this file's age: the worker's only HTTP
// is its optional /metrics listener.
const heartbeatFile = `${config.dataDir}/worker-heartbeat`;
async function beat() {
  const now = new Date();
  await utimes(heartbeatFile, now, now)
    .catch(() => writeFile(heartbeatFile, ''))
    .catch((e) => log('warn', 'heartbeat failed', errorFields(e)));
}
await mkdir(config.dataDir, { recursive: true }).catch(() => {});
void beat();
setInterval(() => void beat(), 10_000).unref();

// The job locks hold only while the event loop runs the renewal timer (IMPORT_LOCK_MS): a loop
// held for longer than a renewal interval is worth a warning before it costs a lapsed lock.
let loopCheckedAt = performance.now();
setInterval(() => {
  const now = performance.now();
  const lagMs = now - loopCheckedAt - 1_000;
  loopCheckedAt = now;
  if (lagMs > IMPORT_LOCK_RENEW_MS)
    log('warn', 'worker event loop was blocked; job locks may lapse', {
      lagMs: Math.round(lagMs),
      lockMs: IMPORT_LOCK_MS,
    });
}, 1_000).unref();

// Phased shutdown: stop taking jobs and let the running ones finish (worker.close() waits), then
// close connections. A second signal exits at once; the job's lock lapses and another worker
// resumes it from its last checkpoint.
let stopping = false;
async function shutdown(signal: string) {
  if (stopping) {
    log('warn', 'second signal; exiting without waiting for running jobs', { signal });
    process.exit(1);
  }
  stopping = true;
  log('info', 'worker shutting down', { signal });
  sweepScheduler.stop();
  await Promise.allSettled([
    importWorker.close(),
    sweepWorker.close(),
    sequencer.stop(),
    relay.stop(),
    eventHints.close(),
    exports.stop(),
    stagingPool.stop(),
    tallies.stop(),
  ]);
  await metricsServer?.stop(true);
  await Promise.allSettled([sweepQueue.close(), importQueue.close()]);
  await sweepConnection.quit().catch(() => sweepConnection.disconnect());
  await apiLoad?.close();
  await closeAndExit(sql, [db, redis]);
}
onStopSignals(shutdown);

/**
 * A private stack for fault tests: its own PostgreSQL cluster and redis-server under a temp data
 * directory (never the shared ones other test files use), the real worker and API as child
 * processes, and the means to kill and restart each of them the way an operator's bad day would.
 */
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { connect, type Sql } from '../../src/db';
import { migrate } from '../../src/migrate';
import { ensureLocalPostgres, freePort } from '../../src/embedded';

const ROOT = resolve(import.meta.dir, '../..');
const ENTRIES = { worker: 'worker/index.ts', api: 'src/index.ts' } as const;

export interface Child {
  name: string;
  proc: Subprocess;
  log: string;
  /** The API's base URL (api children only). */
  url?: string;
}

export interface FaultBed {
  dataDir: string;
  databaseUrl: string;
  redisUrl: string;
  storeDir: string;
  sql: Sql;
  /** Starts the worker or the API with the bed's env plus `env`; the API is ready when this resolves. */
  start(role: keyof typeof ENTRIES, env?: Record<string, string>): Promise<Child>;
  /** SIGKILL, and wait until the process is gone. */
  kill(child: Child): Promise<void>;
  /** `pg_ctl restart -m immediate`: every backend dies at once, unlogged tables are emptied; same port. */
  restartPostgres(): Promise<void>;
  /** `pg_ctl stop -m immediate`: the server is gone, its port closed, until startPostgres(). */
  stopPostgres(): Promise<void>;
  /** Starts the stopped server again on the same port (crash recovery first after an immediate stop). */
  startPostgres(): Promise<void>;
  /** kill -9 of redis-server; nothing was saved, so its data is gone. */
  killRedis(): Promise<void>;
  /** A fresh, empty redis-server on the same port. */
  startRedis(): Promise<void>;
  /** The last lines of a child's log, for assertion messages. */
  tail(child: Child, lines?: number): Promise<string>;
  stop(): Promise<void>;
}

/** What tests that start, kill and watch the service's processes need of a bed (a fault bed or a cluster bed). */
export type ProcessBed = Pick<
  FaultBed,
  'dataDir' | 'databaseUrl' | 'redisUrl' | 'storeDir' | 'sql' | 'start' | 'kill' | 'tail' | 'stop'
>;

/** The real worker and API as child processes with `baseEnv`, their logs under `dataDir`. */
export function childProcesses(
  dataDir: string,
  baseEnv: Record<string, string>,
): Pick<FaultBed, 'start' | 'kill' | 'tail'> & { stopAll(): Promise<void> } {
  const children: Child[] = [];
  return {
    async start(role, extra = {}) {
      const n = children.filter((c) => c.name.startsWith(role)).length;
      const name = `${role}-${n}`;
      const log = join(dataDir, `${name}.log`);
      const childEnv = { ...baseEnv, ...extra };
      let url: string | undefined;
      if (role === 'api') {
        const port = childEnv.PORT ?? String(await freePort());
        childEnv.PORT = port;
        childEnv.HOST = '127.0.0.1';
        url = `http://127.0.0.1:${port}`;
        childEnv.PUBLIC_URL ??= url;
      }
      const fd = openSync(log, 'a');
      const proc = Bun.spawn([process.execPath, join(ROOT, ENTRIES[role])], {
        cwd: ROOT,
        env: childEnv,
        stdin: 'ignore',
        stdout: fd,
        stderr: fd,
      });
      closeSync(fd);
      const child: Child = { name, proc, log, ...(url && { url }) };
      children.push(child);
      if (url) await waitFor(`${name} /healthz`, async () => (await fetch(`${url}/healthz`)).ok);
      return child;
    },
    async kill(child) {
      child.proc.kill('SIGKILL');
      await child.proc.exited;
    },
    async tail(child, lines = 40) {
      const text = await readFile(child.log, 'utf8').catch(() => '');
      return text.split('\n').slice(-lines).join('\n');
    },
    async stopAll() {
      for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
      await Promise.all(children.map((c) => c.proc.exited));
    },
  };
}

const isRoot = () => process.getuid?.() === 0;
const asPostgres = (cmd: string[]) => (isRoot() ? ['runuser', '-u', 'postgres', '--', ...cmd] : cmd);

async function run(cmd: string[]): Promise<string> {
  const p = Bun.spawn(cmd, { stdout: 'pipe', stderr: 'pipe' });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${cmd.join(' ')} failed (exit ${code}): ${err || out}`);
  return out;
}

async function waitFor(what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await Bun.sleep(100);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

export interface RedisServer {
  url: string;
  /** A fresh, empty redis-server on the same port. */
  start(): Promise<void>;
  /** kill -9; nothing was saved, so its data is gone. */
  kill(): Promise<void>;
}

/** A redis-server on a free port that keeps nothing on disk, its log under `dataDir`; started. */
export async function redisServer(dataDir: string): Promise<RedisServer> {
  const port = await freePort();
  let proc: Subprocess | undefined;
  const ping = async () => {
    const p = Bun.spawn(['redis-cli', '-p', String(port), 'ping'], { stdout: 'pipe', stderr: 'ignore' });
    return (await new Response(p.stdout).text()).trim() === 'PONG';
  };
  const server: RedisServer = {
    url: `redis://127.0.0.1:${port}`,
    async start() {
      const fd = openSync(join(dataDir, 'redis.log'), 'a');
      const args = [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dataDir,
      ];
      proc = Bun.spawn(['redis-server', ...args], { stdin: 'ignore', stdout: fd, stderr: fd });
      closeSync(fd);
      await waitFor('redis-server', ping);
    },
    async kill() {
      proc?.kill('SIGKILL');
      await proc?.exited;
    },
  };
  await server.start();
  return server;
}

/**
 * Makes the bed: a cluster initialised in a temp dir (a few seconds), migrated, and a redis-server.
 * `env` applies to every child (IMPORT_BATCH_SIZE and the like).
 */
export async function faultBed(env: Record<string, string> = {}): Promise<FaultBed> {
  const dataDir = await mkdtemp(join(tmpdir(), 'fault-bed-'));
  const pg = await ensureLocalPostgres({ dataDir });
  const databaseUrl = pg.url;
  const pgDir = join(dataDir, 'postgres');
  // postmaster.opts' first word is the server binary; pg_ctl sits beside it.
  const serverOptions = await readFile(join(pgDir, 'postmaster.opts'), 'utf8');
  const pgCtl = join(dirname(serverOptions.split(' ')[0]!.replaceAll('"', '')), 'pg_ctl');
  const sql = connect(databaseUrl, 4);
  await migrate(sql);

  const redis = await redisServer(dataDir);
  const { url: redisUrl, start: startRedis } = redis;

  const storeDir = join(dataDir, 'objects');
  const baseEnv: Record<string, string> = {
    ...(process.env as Record<string, string>),
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    DATA_DIR: dataDir,
    STORAGE_DRIVER: 'local',
    STORAGE_DIR: storeDir,
    UPLOAD_SECRET: 'fault-bed-upload-secret',
    MIGRATE_ON_START: 'false',
    LOG_LEVEL: 'info',
    ...env,
  };

  const processes = childProcesses(dataDir, baseEnv);
  const bed: FaultBed = {
    ...processes,
    dataDir,
    databaseUrl,
    redisUrl,
    storeDir,
    sql,
    async restartPostgres() {
      // -l: without a log file the new server would hold our stdout pipe open forever.
      try {
        await run(
          asPostgres([pgCtl, 'restart', '-D', pgDir, '-l', join(pgDir, 'log'), '-m', 'immediate', '-w', '-t', '120']),
        );
      } catch (e) {
        // Seen once in CI (the chaos soak): the old server stopped and the new one did not come up,
        // and the log went with the bed. The fault under test is the restart, not the harness: say
        // what the server said, and start it again.
        const tail = (
          await Bun.file(join(pgDir, 'log'))
            .text()
            .catch(() => '')
        )
          .split('\n')
          .slice(-15)
          .join('\n');
        console.error(
          `fault bed: PostgreSQL did not come back from its restart (${String(e)}); its log ends:\n${tail}`,
        );
        await Bun.sleep(1_000);
        await bed.startPostgres();
      }
    },
    async stopPostgres() {
      await run(asPostgres([pgCtl, 'stop', '-D', pgDir, '-m', 'immediate', '-w', '-t', '60']));
    },
    async startPostgres() {
      // The same settings (port included) as the last start: postmaster.opts is its command line,
      // `binary "-D" "dir" "-c" "k=v" …`, double-quoted for the shell pg_ctl hands -o to.
      const opts = serverOptions.replace(/^\S+\s+"-D"\s+"[^"]*"\s*/, '').trim();
      await run(asPostgres([pgCtl, 'start', '-D', pgDir, '-l', join(pgDir, 'log'), '-o', opts, '-w', '-t', '120']));
    },
    killRedis: redis.kill,
    startRedis,
    async stop() {
      await processes.stopAll();
      await sql.end({ timeout: 2 }).catch(() => {});
      await bed.killRedis();
      await pg.stop().catch(() => {});
      await run(asPostgres([pgCtl, 'stop', '-D', pgDir, '-m', 'immediate'])).catch(() => {});
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return bed;
}

/**
 * One checksum over every contact of an account: email, attributes, brands and enabled, in
 * email_md5 order. Two runs that stored the same contacts give the same value.
 */
export async function contactsChecksum(sql: Sql, accountId: string): Promise<{ count: number; checksum: string }> {
  const [row] = await sql<{ count: number; checksum: string }[]>`
    select count(*)::int as count,
           coalesce(md5(string_agg(email || '|' || attributes::text || '|' || brand_ids::text || '|' || enabled::text,
                                   E'\n' order by email_md5)), '') as checksum
    from contacts where account_id = ${accountId}::uuid`;
  return row!;
}

/**
 * Polls an import until it is `success` or `failed`. It fails when the import's row shows no
 * progress (status, phase, checkpoint, counts) for `ms`, or after `capMs` in all: an import is
 * bound by what it must do, so one that moves on is waited for however slow the machine is, and
 * one that stands still is called stuck. A bound on the whole run guessed on a fast machine failed
 * on a slower one while the import was still moving (issue 61).
 */
export async function waitForImportEnd(
  sql: Sql,
  accountId: string,
  importId: string,
  ms = 60_000,
  capMs = 600_000,
): Promise<Record<string, unknown>> {
  let last: Record<string, unknown> | undefined;
  let seen = '';
  const started = Date.now();
  let stillSince = started;
  while (Date.now() - stillSince < ms && Date.now() - started < capMs) {
    [last] = await sql<Record<string, unknown>[]>`
      select status, phase, checkpoint, row_count as "rowCount", added_count as "addedCount",
             updated_count as "updatedCount", skipped_count as "skippedCount", malformed_count as "malformedCount",
             duplicate_in_file_count as "duplicateInFileCount", failure_reason as "failureReason",
             percent_complete as "percentComplete", updated_at as "updatedAt"
      from contact_imports where account_id = ${accountId}::uuid and id = ${importId}::uuid`.catch(() => [undefined]);
    if (last?.status === 'success' || last?.status === 'failed') {
      delete last.updatedAt;
      return last;
    }
    const now = JSON.stringify(last);
    if (now !== seen) [seen, stillSince] = [now, Date.now()];
    await Bun.sleep(200);
  }
  const why = Date.now() - started >= capMs ? `did not end within ${capMs} ms` : `made no progress for ${ms} ms`;
  throw new Error(`import ${importId} ${why}; last seen: ${JSON.stringify(last)}`);
}

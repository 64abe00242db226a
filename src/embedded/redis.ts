// Embedded Redis for dev, tests and CI when no REDIS_URL is set: a redis-server child process on a
// free port, recorded in ${dataDir}/redis/state.json so other callers reuse it while it lives.
import { closeSync, existsSync, openSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { Subprocess } from 'bun';
import { aptInstall, freePort, pidAlive, procName, run, sleep, tail, withLock, type LocalService } from './ports';

interface State {
  pid: number;
  port: number;
}

const urlFor = (port: number) => `redis://127.0.0.1:${port}`;

/** A raw RESP PING: no client library, no reconnect loop, just "does it answer +PONG". */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
  });
}

async function findRedisServer(log: (msg: string) => void): Promise<string> {
  const found = Bun.which('redis-server') ?? (existsSync('/usr/bin/redis-server') ? '/usr/bin/redis-server' : null);
  if (found) return found;
  if (process.getuid?.() !== 0) {
    throw new Error(
      'redis-server not found: install Redis (Debian/Ubuntu: sudo apt-get install -y redis-server; ' +
        'macOS: brew install redis) or set REDIS_URL',
    );
  }
  log('redis-server not found: apt-get install -y redis-server');
  const started = Date.now();
  await aptInstall(['redis-server']);
  // The package starts a system redis on 6379: stop and disable it so nothing comes to depend on it.
  await run(['service', 'redis-server', 'stop']);
  await run(['update-rc.d', 'redis-server', 'disable']);
  await run(['systemctl', 'disable', '--now', 'redis-server']);
  log(`installed redis-server in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  return Bun.which('redis-server') ?? '/usr/bin/redis-server';
}

/** The recorded server if it is still ours (same process name) and answering. */
async function liveState(file: string): Promise<State | undefined> {
  const state = (await readFile(file, 'utf8').then(JSON.parse, () => undefined)) as State | undefined;
  if (!state || !pidAlive(state.pid)) return undefined;
  const name = procName(state.pid);
  if (name !== undefined && name !== 'redis-server') return undefined; // pid recycled
  return (await ping(state.port)) ? state : undefined;
}

async function spawnRedis(
  bin: string,
  dir: string,
  log: (msg: string) => void,
): Promise<{ proc: Subprocess; port: number }> {
  const logFile = join(dir, 'redis.log');
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    log(`starting redis-server on 127.0.0.1:${port}`);
    const fd = openSync(logFile, 'a');
    const proc = Bun.spawn(
      [
        bin,
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
        '--maxmemory-policy',
        'noeviction',
        '--daemonize',
        'no',
      ],
      { cwd: dir, stdin: 'ignore', stdout: fd, stderr: fd },
    );
    closeSync(fd); // the child has its own copy
    // Don't let a running server keep the caller's event loop alive: stop() re-refs it while waiting.
    proc.unref();
    const deadline = Date.now() + 30_000;
    while (proc.exitCode === null && Date.now() < deadline) {
      if (await ping(port)) return { proc, port };
      await sleep(100);
    }
    if (proc.exitCode === null) proc.kill('SIGKILL');
    await proc.exited;
    const lastLines = await tail(logFile);
    // The free port can be taken between freePort() and the bind: pick another.
    if (attempt < 3 && /address already in use/i.test(lastLines)) continue;
    throw new Error(`redis-server did not come up on port ${port} (exit ${proc.exitCode}):\n${lastLines}`);
  }
}

async function stopRedis(proc: Subprocess, stateFile: string, log: (msg: string) => void): Promise<void> {
  log(`stopping redis-server (pid ${proc.pid})`);
  proc.ref(); // keep the caller alive until the child is really gone
  proc.kill('SIGTERM');
  const killer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
  await proc.exited;
  clearTimeout(killer);
  const state = (await readFile(stateFile, 'utf8').then(JSON.parse, () => undefined)) as State | undefined;
  if (state?.pid === proc.pid) await rm(stateFile, { force: true });
}

/**
 * Starts (or reuses) a local redis-server for `${dataDir}`; installs the Debian package when missing and root.
 * @example const redis = await ensureLocalRedis({ dataDir: '/work/main/.data', log: console.log })
 */
export async function ensureLocalRedis(opts: { dataDir: string; log?: (msg: string) => void }): Promise<LocalService> {
  const log = opts.log ?? (() => {});
  const dir = join(opts.dataDir, 'redis');
  const stateFile = join(dir, 'state.json');
  await mkdir(dir, { recursive: true });
  return withLock(join(opts.dataDir, 'redis.lock'), async () => {
    const live = await liveState(stateFile);
    if (live) {
      log(`reusing redis-server (pid ${live.pid}) on 127.0.0.1:${live.port}`);
      return { url: urlFor(live.port), startedByUs: false, stop: async () => {} };
    }
    const bin = await findRedisServer(log);
    const { proc, port } = await spawnRedis(bin, dir, log);
    await writeFile(stateFile, JSON.stringify({ pid: proc.pid, port } satisfies State));
    let stopping: Promise<void> | undefined;
    return { url: urlFor(port), startedByUs: true, stop: () => (stopping ??= stopRedis(proc, stateFile, log)) };
  });
}

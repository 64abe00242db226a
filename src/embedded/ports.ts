// Plumbing shared by the embedded local services: free ports, process checks, a cross-process lock
// and a small command runner. Nothing here registers signal handlers: callers own shutdown.
import { readFileSync } from 'node:fs';
import { link, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';

export interface LocalService {
  url: string;
  /** false when an already running instance was reused; its stop() is then a no-op */
  startedByUs: boolean;
  stop(): Promise<void>;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A TCP port that was free a moment ago (the kernel picks it when binding port 0).
 * Another process can take it before we bind it, so starters retry on "address in use".
 * @example const port = await freePort()
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('could not obtain a free TCP port'))));
    });
  });
}

/** True if something accepts TCP connections on host:port. */
export function isPortOpen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host });
    const done = (open: boolean) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** True if a process with this pid exists (EPERM: it exists but belongs to another user) and is not a zombie. */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // A dead daemon stays a zombie until init reaps it, which some container inits do late.
  return procField(pid, 0) !== 'Z';
}

/** The kernel's name for a process (/proc/<pid>/comm), undefined where /proc is missing. Catches recycled pids. */
export function procName(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** A field of /proc/<pid>/stat counted from the state (0 = state, 19 = start time); '' without /proc. */
function procField(pid: number, index: number): string {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ')[index] ?? '';
  } catch {
    return '';
  }
}

/** Start time in clock ticks since boot: pid + start time names a process uniquely. */
const procStart = (pid: number) => procField(pid, 19);

/** A lock file is stale when its holder is gone (or the pid now names another process). */
async function isStale(path: string): Promise<boolean> {
  const text = await readFile(path, 'utf8').catch(() => undefined);
  if (text === undefined) return false; // vanished: simply retry the create
  const [pidText = '', start = ''] = text.trim().split(' ');
  // Empty: the holder is between create and write; only a long-empty file is a leftover.
  if (!pidText)
    return (
      Date.now() -
        (await stat(path).then(
          (s) => s.mtimeMs,
          () => Date.now(),
        )) >
      10_000
    );
  const pid = Number(pidText);
  return !pidAlive(pid) || (start !== '' && procStart(pid) !== '' && procStart(pid) !== start);
}

async function breakLock(path: string): Promise<void> {
  const aside = `${path}.${process.pid}.${Date.now()}`;
  try {
    await rename(path, aside);
  } catch {
    return; // someone else broke it first
  }
  // Between our check and the rename another process may have taken the lock legitimately: put it back.
  if (!(await isStale(aside))) await link(aside, path).catch(() => {});
  await rm(aside, { force: true });
}

/**
 * Runs fn while holding an exclusive lock file (created with 'wx', holding "pid starttime").
 * Works across processes and across concurrent calls in one process; locks of dead holders are broken.
 * @example await withLock('/work/main/.data/postgres.lock', () => startCluster())
 */
export async function withLock<T>(path: string, fn: () => Promise<T>, timeoutMs = 600_000): Promise<T> {
  const me = `${process.pid} ${procStart(process.pid)}\n`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await writeFile(path, me, { flag: 'wx' });
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    if (await isStale(path)) {
      await breakLock(path);
      continue;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000}s waiting for lock ${path}`);
    await sleep(100 + Math.random() * 200);
  }
  try {
    return await fn();
  } finally {
    // Release only our own lock, never one a confused peer re-created.
    if ((await readFile(path, 'utf8').catch(() => '')) === me) await rm(path, { force: true });
  }
}

export interface RunResult {
  code: number;
  out: string;
  err: string;
}

/** Runs a command to completion, capturing output; a missing executable gives code 127 instead of throwing. */
export async function run(cmd: string[], env: Record<string, string> = {}): Promise<RunResult> {
  let proc;
  try {
    // cwd '/' so a command run as another user never trips over an unreadable current directory
    proc = Bun.spawn(cmd, {
      cwd: '/',
      env: { ...process.env, ...env },
      stdin: 'ignore',
      stdout: 'pipe',
      stderr: 'pipe',
    });
  } catch (e) {
    return { code: 127, out: '', err: String(e) };
  }
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code: await proc.exited, out: out.trim(), err: err.trim() };
}

/**
 * `apt-get install -y` of `packages`, with one `apt-get update` and a second try when the first
 * fails (a fresh machine may have no package lists yet); throws with apt's last words.
 */
export async function aptInstall(packages: string[]): Promise<void> {
  // Lock timeout: another project process (other data dir) may be running apt at the same moment.
  const apt = (...args: string[]) =>
    run(['apt-get', '-o', 'DPkg::Lock::Timeout=300', ...args], { DEBIAN_FRONTEND: 'noninteractive' });
  let r = await apt('install', '-y', ...packages);
  if (r.code !== 0) {
    await apt('update');
    r = await apt('install', '-y', ...packages);
  }
  if (r.code !== 0) {
    const what = `apt-get install -y ${packages.join(' ')}`;
    throw new Error(`${what} failed (exit ${r.code}):\n${(r.err || r.out).slice(-2000)}`);
  }
}

/** The last lines of a text file, for error messages. */
export async function tail(path: string, lines = 20): Promise<string> {
  const text = await readFile(path, 'utf8').catch(() => '');
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

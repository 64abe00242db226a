/**
 * The stack as an operator runs it: `bun src/cli/start.ts` (what `npm start` runs; npm's sh would
 * not pass our SIGTERM on) over the soak bed's PostgreSQL, Redis and object store. Its supervisor's lines say
 * which pid the API and the worker have now and why one died, so the soak reads them to kill the
 * right process and to tell a death it caused from one it did not.
 */
import { appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { freePort } from '../../../src/embedded';
import type { SoakBed } from './bed';

const ROOT = resolve(import.meta.dir, '../../..');
/** application_name of the stack's connections, so a terminate reaches them and not the bed's own. */
export const STACK_APP_NAME = 'soak-service';

export type Role = 'api' | 'worker';

export interface Death {
  /** Date.now() when the supervisor said so */
  at: number;
  role: Role;
  pid: number;
  why: string;
  /** The soak killed this pid itself. */
  expected: boolean;
}

export interface Stack {
  url: string;
  log: string;
  pid(role: Role): number | undefined;
  /** kill -9 of the role's current process; recorded as a death the soak caused. */
  kill(role: Role): number | undefined;
  deaths: Death[];
  /** Lines that say a process hit something it should not (uncaught errors, the FileHandle crash). */
  alarms: string[];
  /** Date.now() of each "import waits: a disk is full" line: what a full disk did to the imports. */
  diskWaits: number[];
  /** start.ts itself still runs and every child (each API process, the worker) has a live pid. */
  running(): boolean;
  stop(): Promise<void>;
}

const ALARM = /uncaughtException|unhandledRejection|FileHandle|panic|Segmentation|"level":"fatal"/i;

export async function startStack(
  bed: Pick<SoakBed, 'databaseUrl' | 'redisUrl' | 'storeDir' | 'dataDir'>,
  env: Record<string, string>,
): Promise<Stack> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // Outside the bed's dir, which is removed at the end: the log is what a failed soak is read from.
  const log = join(tmpdir(), `chaos-soak-${process.pid}-${port}.log`);
  const proc: Subprocess<'ignore', 'pipe', 'pipe'> = Bun.spawn([process.execPath, 'src/cli/start.ts'], {
    cwd: ROOT,
    env: {
      ...(process.env as Record<string, string>),
      DATABASE_URL: bed.databaseUrl,
      REDIS_URL: bed.redisUrl,
      STORAGE_DRIVER: 'local',
      STORAGE_DIR: bed.storeDir,
      DATA_DIR: join(bed.dataDir, 'stack'),
      UPLOAD_SECRET: 'soak-upload-secret',
      PORT: String(port),
      HOST: '127.0.0.1',
      PUBLIC_URL: url,
      APP_NAME: STACK_APP_NAME,
      WORKER_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
      ...env,
    },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  // By the supervisor's name: `api`, or `api-0`, `api-1`, … with API_PROCESSES > 1; `worker`.
  const pids = new Map<string, number>();
  /** The role's first process: the one the soak kills (the others of a group go on serving the port). */
  const first = (role: Role) => pids.get(role) ?? pids.get(`${role}-0`);
  const killed = new Set<number>();
  const everyPid = new Set<number>();
  const deaths: Death[] = [];
  const alarms: string[] = [];
  const diskWaits: number[] = [];
  let up = false;

  const onLine = (line: string) => {
    appendFileSync(log, `${line}\n`);
    const started = /\[start\] ((api|worker)(-\d+)?) started \(pid (\d+)\)/.exec(line);
    if (started) {
      pids.set(started[1]!, Number(started[4]));
      everyPid.add(Number(started[4]));
    }
    const died = /\[start\] (api|worker)(-\d+)? \(pid (\d+)\) died: ([^,]+)/.exec(line);
    if (died) {
      const pid = Number(died[3]);
      deaths.push({ at: Date.now(), role: died[1] as Role, pid, why: died[4]!, expected: killed.has(pid) });
    }
    if (line.includes('Contact service is up.')) up = true;
    if (line.includes('import waits: a disk is full')) diskWaits.push(Date.now());
    if (ALARM.test(line) && alarms.length < 50) alarms.push(line.slice(0, 400));
  };
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    let rest = '';
    for await (const chunk of stream) {
      rest += decoder.decode(chunk, { stream: true });
      const lines = rest.split('\n');
      rest = lines.pop()!;
      for (const l of lines) onLine(l);
    }
    if (rest) onLine(rest);
  };
  void pump(proc.stdout);
  void pump(proc.stderr);

  const alive = (pid: number | undefined) => {
    if (!pid) return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  const stack: Stack = {
    url,
    log,
    deaths,
    alarms,
    diskWaits,
    pid: first,
    kill(role) {
      const pid = first(role);
      if (!alive(pid)) return undefined;
      killed.add(pid!);
      process.kill(pid!, 'SIGKILL');
      return pid;
    },
    running: () => proc.exitCode === null && pids.size >= 2 && [...pids.values()].every(alive),
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      const done = await Promise.race([proc.exited.then(() => true), Bun.sleep(30_000).then(() => false)]);
      if (!done) proc.kill('SIGKILL');
      await proc.exited;
      // start.ts killed with SIGKILL cannot stop its children: nothing it started may outlive the soak.
      for (const pid of everyPid) if (alive(pid)) process.kill(pid, 'SIGKILL');
    },
  };

  const deadline = Date.now() + 90_000;
  while (!up) {
    if (proc.exitCode !== null) throw new Error(`the stack exited (code ${proc.exitCode}) at start; see ${log}`);
    if (Date.now() > deadline) {
      await stack.stop();
      throw new Error(`the stack did not come up within 90 s; see ${log}`);
    }
    await Bun.sleep(100);
  }
  return stack;
}

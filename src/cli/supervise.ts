/**
 * The embedded supervisor of `npm start`: runs the API and the worker as child processes and
 * starts a child again whenever it exits on its own (a crash, an `uncaughtException` exit, a
 * kill -9 by the OOM killer), saying why, with a growing pause so a child that dies at start-up
 * does not spin. Only stop() (Ctrl-C / SIGTERM of `npm start`) ends them for good.
 */
import type { Subprocess } from 'bun';

/** First pause before a restart; doubled per quick death, up to MAX_BACKOFF_MS. */
const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 30_000;
/** A child that ran this long was healthy: its next death starts the backoff over. */
const HEALTHY_AFTER_MS = 60_000;
/** How long stop() lets the children shut down gracefully (the worker finishes its batch) before SIGKILL. */
const STOP_GRACE_MS = 20_000;

export interface ChildSpec {
  name: string;
  cmd: string[];
  env: Record<string, string | undefined>;
}

export class Supervisor {
  private readonly running = new Map<string, Subprocess>();
  private readonly timers = new Set<Timer>();
  private stopping = false;

  constructor(private readonly say: (msg: string) => void) {}

  /** Starts the child and keeps it running until stop(). */
  start(spec: ChildSpec, restarts = 0, backoffMs = FIRST_BACKOFF_MS): void {
    if (this.stopping) return;
    const startedAt = Date.now();
    const child = Bun.spawn(spec.cmd, { env: spec.env, stdio: ['ignore', 'inherit', 'inherit'] });
    this.running.set(spec.name, child);
    this.say(`${spec.name} started (pid ${child.pid})${restarts ? `, restart ${restarts}` : ''}`);
    void child.exited.then((code) => {
      this.running.delete(spec.name);
      if (this.stopping) return;
      const ranMs = Date.now() - startedAt;
      const why = child.signalCode ? `killed by ${child.signalCode}` : `exit code ${code}`;
      const pause = ranMs >= HEALTHY_AFTER_MS ? FIRST_BACKOFF_MS : backoffMs;
      this.say(
        `${spec.name} (pid ${child.pid}) died: ${why}, after ${(ranMs / 1000).toFixed(1)} s; ` +
          `restarting in ${(pause / 1000).toFixed(1)} s`,
      );
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        this.start(spec, restarts + 1, Math.min(MAX_BACKOFF_MS, pause * 2));
      }, pause);
      this.timers.add(timer);
    });
  }

  /** Stops restarting, sends SIGTERM to every child, and SIGKILL to any still there after the grace time. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const children = [...this.running.values()];
    for (const c of children) c.kill('SIGTERM');
    const exited = Promise.all(children.map((c) => c.exited));
    const timeout = new Promise((r) => setTimeout(r, STOP_GRACE_MS).unref());
    if ((await Promise.race([exited.then(() => 'done'), timeout])) !== 'done') {
      for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
      await exited;
    }
  }
}

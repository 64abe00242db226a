import { errorFields, log } from '../../src/log';

export interface Loop {
  /** Runs the next pass now instead of at the end of the wait (a pass that is running finishes first). */
  poke(): void;
  /** No pass starts after this; resolves once the running one ended. */
  stop(): Promise<void>;
}

/**
 * Runs `pass` again and again, `waitMs` after each one ended, until stopped. A pass returning true
 * found more to do and runs again at once. A failing pass (PostgreSQL restarting, a connection cut)
 * is logged once per run of failures, not once a tick, and the loop goes on: the worker's
 * background work never stops for a fault and never takes the process down.
 */
export function runLoop(name: string, waitMs: number, pass: () => Promise<boolean>): Loop {
  let stopped = false;
  let failing = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;
  const schedule = (ms: number) => {
    if (stopped) return;
    clearTimeout(timer);
    timer = setTimeout(() => void (running = once()), ms);
  };
  const once = async () => {
    let more = false;
    try {
      more = await pass();
      if (failing) log('info', `${name} works again`);
      failing = false;
    } catch (e) {
      if (!failing) log('warn', `${name} failed; retrying`, errorFields(e));
      failing = true;
    }
    running = undefined;
    schedule(more && !failing ? 0 : waitMs);
  };
  schedule(0);
  return {
    poke() {
      if (!running) schedule(0);
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

/**
 * What a test sees of Prometheus's alerts over time: GET /api/v1/alerts polled every 250 ms, each
 * alert's changes of state (pending, firing, and resolved: no longer listed) with the seconds since
 * the watch began, and the test's own marks (a fault, a recovery) between them.
 */
import type { PrometheusServer } from './prometheus';

export type AlertState = 'pending' | 'firing' | 'resolved';

export interface TimelineEntry {
  at: number;
  alert?: string;
  state?: AlertState;
  mark?: string;
}

export interface AlertTimeline {
  entries: TimelineEntry[];
  /** A line in the timeline for something the test did. */
  mark(what: string): void;
  /** Seconds since the watch began at which `alert` reached `state` after `since`, waiting up to `ms`. */
  waitFor(alert: string, state: AlertState, since: number, ms?: number): Promise<number>;
  /** Resolves once a poll lists no alert at all (throws after `ms`). */
  quiet(ms?: number): Promise<void>;
  /** The alerts listed right now, by name. */
  active(): Map<string, AlertState>;
  /** The timeline as lines, `+12.3s  ImportStalled  pending`. */
  lines(): string[];
  stop(): Promise<void>;
}

export function watchAlerts(prometheus: PrometheusServer): AlertTimeline {
  const started = performance.now();
  const since = () => Math.round((performance.now() - started) / 100) / 10;
  const entries: TimelineEntry[] = [];
  let current = new Map<string, AlertState>();
  let running = true;
  let polled = false;
  const poll = async () => {
    while (running) {
      const listed = await prometheus.alerts().catch(() => undefined);
      if (listed) {
        const now = new Map<string, AlertState>();
        // An alert of several series (instances) counts as firing once any of them fires.
        for (const a of listed) {
          const name = a.labels.alertname!;
          if (now.get(name) !== 'firing') now.set(name, a.state);
        }
        for (const [alert, state] of now) if (current.get(alert) !== state) entries.push({ at: since(), alert, state });
        for (const alert of current.keys())
          if (!now.has(alert)) entries.push({ at: since(), alert, state: 'resolved' });
        current = now;
        polled = true;
      }
      await Bun.sleep(250);
    }
  };
  const polling = poll();
  return {
    entries,
    mark(what) {
      entries.push({ at: since(), mark: what });
    },
    async waitFor(alert, state, after, ms = 45_000) {
      const deadline = performance.now() + ms;
      for (;;) {
        const hit = entries.find((e) => e.alert === alert && e.state === state && e.at >= after);
        if (hit) return hit.at;
        if (performance.now() > deadline)
          throw new Error(`${alert} did not become ${state} within ${ms} ms; timeline:\n${this.lines().join('\n')}`);
        await Bun.sleep(100);
      }
    },
    async quiet(ms = 20_000) {
      const deadline = performance.now() + ms;
      while (!polled || current.size > 0) {
        if (performance.now() > deadline)
          throw new Error(`alerts still active after ${ms} ms: ${[...current.keys()].join(', ')}`);
        await Bun.sleep(100);
      }
    },
    active: () => new Map(current),
    lines: () =>
      entries.map((e) =>
        e.mark ? `+${e.at.toFixed(1)}s  -- ${e.mark}` : `+${e.at.toFixed(1)}s  ${e.alert!.padEnd(22)} ${e.state}`,
      ),
    async stop() {
      running = false;
      await polling;
    },
  };
}

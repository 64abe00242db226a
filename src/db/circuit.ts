import { databaseUnreachable, isConnectionGone, isDatabaseUnavailable, isSessionEnded } from './unavailable';
import { errorFields, log } from '../log';

/**
 * How long a probe may take before it counts as "the database is away": a connection and one
 * statement, which a loaded machine can slow to a second without the database being away.
 */
const PROBE_TIMEOUT_MS = 2_000;
/** How long a request waits for a probe's word while the circuit is open, so that it is answered within 1 s. */
const REQUEST_WAIT_MS = 900;
/**
 * A refused request does not start a new probe sooner than this after the last one ended: at most
 * ten connection attempts a second against a database in crash recovery, and a request that comes
 * this soon after a failed probe is refused on its word.
 */
const PROBE_GAP_MS = 100;
/** Attempts of one probe while each fails with a lost connection (runProbe). */
const PROBE_TRIES = 3;

/**
 * Seconds the probe's own connection waits between rounds of connection attempts (every host of
 * DATABASE_URL tried once) while no host takes it: 0.1 s, then 0.2 s. At once, its one connection
 * opened 40-120 sessions a second on a standby during a failover (target_session_attrs=read-write);
 * 0.2 s keeps it to five rounds a second and delays the circuit's closing by at most that after
 * PostgreSQL answers again. Given to connect() as its reconnectDelay (src/index.ts).
 */
export function probeReconnectDelaySeconds(failures: number): number {
  return Math.min(0.05 * 2 ** failures, 0.2);
}

/**
 * The API's circuit for "the database is away" (the rule itself is src/db/unavailable.ts). Requests
 * that meet a lost or refused connection could each wait out the pool's reconnects and connect
 * timeout (10 s) before answering 503; once a probe on a connection of its own has confirmed that
 * PostgreSQL does not answer, the circuit is open and a request that needs the database is refused
 * within 1 s (it waits for a probe's word at most REQUEST_WAIT_MS), never queued in the pool.
 *
 * - closed: every request goes ahead. A failure that says the database is away, or a pool connection
 *   that closed, starts a probe; a failed probe opens the circuit.
 * - open: a request half-opens it: it waits for a probe (the one under way, or a new one when the
 *   last ended PROBE_GAP_MS ago or more, else it is refused on the last one's word). A probe that
 *   answers closes the circuit and lets the request through, so the first request after recovery
 *   succeeds; one that fails refuses it with `databaseUnreachable()`, which the error mapper answers
 *   like any other "database away" failure (503 with Retry-After).
 */
export class DatabaseCircuit {
  private open = false;
  private probing: Promise<boolean> | undefined;
  private lastProbeEnd = 0;
  private closed = false;

  /** `probe` runs one statement on a connection outside the request pool. */
  constructor(private readonly probe: () => Promise<unknown>) {}

  get isOpen(): boolean {
    return this.open;
  }

  /**
   * Undefined when a request may use the database at once (closed: no promise on the hot path), else
   * a promise that resolves when it may, or rejects with `databaseUnreachable()` while it is known away.
   */
  admit(): Promise<void> | undefined {
    return this.open ? this.halfOpen() : undefined;
  }

  private async halfOpen(): Promise<void> {
    const answered = this.probing ?? (Date.now() - this.lastProbeEnd >= PROBE_GAP_MS ? this.check() : undefined);
    if (answered && (await within(answered, REQUEST_WAIT_MS))) return;
    throw databaseUnreachable();
  }

  /** A request or statement failed: if the failure says the database is away, find out whether it is. */
  failed(error: unknown): void {
    if (isDatabaseUnavailable(error)) this.suspect();
  }

  /** Something suggests the database went away (a pool connection closed): probe it unless a probe runs. */
  suspect(): void {
    if (!this.open && !this.probing && !this.closed) void this.check();
  }

  /** At shutdown, before the pools end: their connections' closes are no sign of the database. */
  close(): void {
    this.closed = true;
  }

  /** One probe (shared by everyone asking while it runs): true when the database answered within the limit. */
  check(): Promise<boolean> {
    this.probing ??= this.runProbe().finally(() => {
      this.probing = undefined;
      this.lastProbeEnd = Date.now();
    });
    return this.probing;
  }

  private async runProbe(): Promise<boolean> {
    const attempt = () =>
      this.probe().then(
        () => undefined,
        (e: unknown) => e,
      );
    // The probe's own connection may be one that was just terminated: a lost session says nothing of
    // the database, so it tries again on a new connection. Past the second try only while each still
    // meets a lost session (a terminated connection whose end the probe has not read yet fails a
    // second attempt as well: the chaos soak met that), up to PROBE_TRIES: a server that refuses or
    // does not answer the second try is away, and the circuit opens as soon as before.
    const tries = async () => {
      for (let n = 1; ; n++) {
        const e = await attempt();
        if (e === undefined || !isConnectionGone(e) || n >= PROBE_TRIES) return e;
        if (n >= 2 && !isSessionEnded(e)) return e;
      }
    };
    const failure = await within(tries(), PROBE_TIMEOUT_MS, new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`));
    const answered = failure === undefined;
    if (answered && this.open) log('info', 'the database answers again; requests go ahead');
    if (!answered && !this.open)
      log('warn', 'the database does not answer; requests that need it get 503 until a probe answers', {
        ...errorFields(failure),
      });
    this.open = !answered;
    return answered;
  }
}

/** `promise`'s value, or `otherwise` if it has not settled within `ms`. */
async function within<T, U = false>(promise: Promise<T>, ms: number, otherwise: U = false as U): Promise<T | U> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<U>((resolve) => (timer = setTimeout(resolve, ms, otherwise)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

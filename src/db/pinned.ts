import type postgres from 'postgres';
import { connectionLost, isDatabaseUnavailable } from './unavailable';
import { wrapSql } from './sql-wrapper';

/**
 * Keeps postgres.js (3.4.9, the latest release) from sending a statement on a pinned connection
 * it has already closed: the connection of a transaction (`sql.begin`, `tx.savepoint`) or of a
 * reservation (`sql.reserve`).
 *
 * The trap: when a connection's socket closes (PostgreSQL restarted, pg_terminate_backend),
 * postgres.js rejects the statements in flight and sets the socket to null, but a pinned handle
 * still hands new statements straight to that connection object, whose `execute` checks only that
 * the pool was not ended. The bytes are queued for a `setImmediate(nextWrite)`, which then calls
 * `socket.write` on null: an uncaughtException ("null is not an object (evaluating
 * 'socket.write')", connection.js:255) that no caller can catch, and the statement never settles.
 * Every transaction that is running when its connection dies hits it by itself: its callback
 * fails, and postgres.js sends `rollback` on the dead connection. And `release()` of a reservation
 * whose connection died puts that closed connection back among the pool's open ones, so the next
 * ordinary query meets the same null socket (porsager/postgres#1208, #1154, #1066; open, unfixed).
 *
 * So every pinned handle here is wrapped: each of its statements is checked just before postgres.js
 * would send it, and refused with CONNECTION_CLOSED once the connection is known lost; a transaction
 * whose connection was lost never returns to postgres.js (which has already rejected the
 * transaction, so no caller waits on it), so no `rollback` or `commit` is sent on it; and a lost
 * reservation's `release()` leaves the connection to the pool.
 */
export function guardPinned<T extends postgres.Sql<{}>>(sql: T): T {
  return wrapSql(sql, sql as unknown as (...args: unknown[]) => unknown, {
    begin: (...args: unknown[]) => begin(sql, args),
    reserve: () => reserve(sql),
  });
}

/** One pinned connection as seen from here. */
interface Pin {
  /** Why the connection is known gone, once it is. */
  lost?: unknown;
  /** False once postgres.js no longer holds the connection for this handle (reservations). */
  owned?: () => boolean;
  /** Resolves when postgres.js rejected the transaction because its connection closed. */
  ended?: Promise<void>;
}

/** What this module touches of a postgres.js Query (a Promise that runs when first awaited). */
interface PendingQuery extends Promise<unknown> {
  handler: ((query: PendingQuery) => unknown) & { debug?: unknown };
  reject: (error: unknown) => void;
}

type Callback = (sql: unknown) => unknown;

function begin(sql: postgres.Sql<{}>, args: unknown[]): Promise<unknown> {
  const fn = args.pop() as Callback;
  let closed!: () => void;
  const pin: Pin = { ended: new Promise((resolve) => (closed = resolve)) };
  const run = (sql.begin as (...a: unknown[]) => Promise<unknown>)(...args, (tx: postgres.TransactionSql<{}>) =>
    runPinned(pin, tx, fn),
  );
  // While the callback runs, the transaction's promise can only reject because the connection
  // closed (postgres.js races the callback against the connection's close).
  run.then(undefined, (e: unknown) => {
    pin.lost ??= e;
    closed();
  });
  return run;
}

async function reserve(sql: postgres.Sql<{}>): Promise<postgres.ReservedSql<{}>> {
  const reserved = await sql.reserve();
  // postgres.js marks the connection it reserved with a function of its own, and drops that mark
  // when the connection closes or is released. One statement shows us the connection object.
  let connection: { reserved?: unknown } | undefined;
  let mark: unknown;
  const onexecute = (c: { reserved?: unknown }) => {
    connection = c;
    mark = c.reserved;
    return true; // what execute would have returned: the connection can take more
  };
  await reserved.unsafe('select 1', [], { onexecute } as postgres.UnsafeQueryOptions);
  const pin: Pin = connection ? { owned: () => connection!.reserved === mark } : {};
  const guarded = guardHandle(reserved, pin);
  return new Proxy(guarded, {
    get(target, prop, receiver) {
      if (prop === 'release') return () => (pin.owned?.() ?? pin.lost === undefined) && reserved.release();
      return Reflect.get(target, prop, receiver);
    },
  });
}

/** The callback of a transaction or savepoint, on a guarded handle; never settles once the connection is lost. */
async function runPinned(pin: Pin, tx: postgres.TransactionSql<{}>, fn: Callback): Promise<unknown> {
  let outcome: { value: unknown } | { error: unknown };
  try {
    outcome = { value: await fn(guardHandle(tx, pin)) };
  } catch (error) {
    if (isDatabaseUnavailable(error)) pin.lost ??= error;
    outcome = { error };
  }
  // The close and this callback's failure reach us through different promise chains; give the close
  // a moment. A connection error without a close (none is known) falls through to postgres.js.
  if (pin.lost !== undefined && (await closedWithin(pin, 1_000))) return new Promise(() => {});
  if ('error' in outcome) throw outcome.error;
  return outcome.value;
}

async function closedWithin(pin: Pin, ms: number): Promise<boolean> {
  if (!pin.ended) return false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(resolve, ms, false)));
  try {
    return await Promise.race([pin.ended.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A handle whose statements (tagged, unsafe, file) and savepoints go through the pin's check. */
function guardHandle<H extends object>(handle: H, pin: Pin): H {
  return new Proxy(handle, {
    apply(target, thisArg, args) {
      return guardQuery(pin, Reflect.apply(target as (...a: unknown[]) => unknown, thisArg, args));
    },
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      if (prop === 'unsafe' || prop === 'file')
        return (...args: unknown[]) => guardQuery(pin, value.apply(target, args));
      if (prop === 'savepoint') {
        return (...args: unknown[]) => {
          const k = args.findIndex((a) => typeof a === 'function');
          if (k >= 0) {
            const fn = args[k] as Callback;
            args[k] = (sp: postgres.TransactionSql<{}>) => runPinned(pin, sp, fn);
          }
          return value.apply(target, args);
        };
      }
      return value;
    },
  });
}

function isPendingQuery(x: unknown): x is PendingQuery {
  return (
    x instanceof Promise &&
    typeof (x as Partial<PendingQuery>).handler === 'function' &&
    typeof (x as Partial<PendingQuery>).reject === 'function'
  );
}

/**
 * A Query calls its handler once, when first awaited, to hand itself to the connection: the last
 * moment to refuse it. Its outcome also tells us when the connection is lost.
 */
function guardQuery(pin: Pin, query: unknown): unknown {
  if (!isPendingQuery(query)) return query; // identifiers, fragments, helpers
  const send = query.handler;
  const guarded: PendingQuery['handler'] = (q) => {
    if (pin.lost === undefined && pin.owned && !pin.owned()) pin.lost = connectionLost();
    if (pin.lost !== undefined) return q.reject(connectionLost(pin.lost));
    Promise.prototype.then.call(q, undefined, (e: unknown) => {
      if (isDatabaseUnavailable(e)) pin.lost ??= e;
    });
    return send(q);
  };
  guarded.debug = send.debug;
  query.handler = guarded;
  return query;
}

import type postgres from 'postgres';
import { wrapSql } from './sql-wrapper';

/**
 * What a process holds of its postgres.js pool right now. postgres.js (3.4.9) keeps its connection
 * queues private, so this counts from the outside what holds a pool connection: a reservation from
 * `reserve()` until `release()`, a transaction from `begin()` until it settles, and a statement on
 * the pool from the moment it is handed to the pool until it settles. A holder waiting for a free
 * connection counts too: `held` above `size` is demand the pool cannot meet at once (waiting for a
 * connection, or pipelined behind another statement on a busy one). The LISTEN connection of the
 * cache invalidation is postgres.js's own, outside the pool, and not counted.
 */
export interface PoolUsage {
  /** the pool's `max` */
  readonly size: number;
  /** reservations, transactions and pool statements under way */
  held: number;
}

const usages = new WeakMap<object, PoolUsage>();

/** The usage of a pool that `trackPool` returned (every `connect()` of src/db/pool.ts), else undefined. */
export function poolUsage(sql: object): PoolUsage | undefined {
  return usages.get(sql);
}

/** A postgres.js Query (a Promise run when first awaited) as far as this module touches it. */
interface PendingQuery extends Promise<unknown> {
  handler: ((query: PendingQuery) => unknown) & { debug?: unknown };
  reject: (error: unknown) => void;
}

function isPendingQuery(x: unknown): x is PendingQuery {
  return (
    x instanceof Promise &&
    typeof (x as Partial<PendingQuery>).handler === 'function' &&
    typeof (x as Partial<PendingQuery>).reject === 'function'
  );
}

/**
 * `sql` with its use counted (see PoolUsage). Costs a counter and one promise callback per statement.
 * Statements inside a transaction or on a reserved connection are not counted again: they run on
 * the connection their transaction or reservation already holds.
 */
export function trackPool<T extends postgres.Sql<{}>>(sql: T, size: number): T {
  const usage: PoolUsage = { size, held: 0 };
  const hold = () => {
    usage.held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      usage.held--;
    };
  };
  // A statement takes a connection when postgres.js hands it to the pool: when it is first awaited,
  // not when it is written (a fragment such as sql`and x = ${y}` is never handed over at all).
  const counted = (query: unknown): unknown => {
    if (!isPendingQuery(query)) return query;
    const send = query.handler;
    const handler: PendingQuery['handler'] = (q) => {
      const release = hold();
      // Promise.prototype.then: a Query's own then() would run it.
      Promise.prototype.then.call(q, release, release);
      return send(q);
    };
    handler.debug = send.debug;
    query.handler = handler;
    return query;
  };
  const call = (fn: unknown, args: unknown[]) => (fn as (...a: unknown[]) => unknown)(...args);
  const tracked = wrapSql(sql, (...args) => counted(call(sql, args)), {
    unsafe: (...args: unknown[]) => counted(call(sql.unsafe, args)),
    file: (...args: unknown[]) => counted(call(sql.file, args)),
    begin: (...args: unknown[]) => {
      const release = hold();
      const run = call(sql.begin, args) as Promise<unknown>;
      run.then(release, release);
      return run;
    },
    reserve: () => reserve(() => sql.reserve(), hold()),
  });
  usages.set(tracked, usage);
  return tracked;
}

async function reserve(
  reserveOf: () => Promise<postgres.ReservedSql<{}>>,
  release: () => void,
): Promise<postgres.ReservedSql<{}>> {
  let reserved: postgres.ReservedSql<{}>;
  try {
    reserved = await reserveOf();
  } catch (e) {
    release();
    throw e;
  }
  return new Proxy(reserved, {
    get(target, prop, receiver) {
      if (prop !== 'release') return Reflect.get(target, prop, receiver);
      return () => {
        release();
        return target.release();
      };
    },
  });
}

import { connectBeside, type Sql } from './pool';
import { errorFields, log } from '../log';

/** A PostgreSQL server by address. */
export interface NodeAddress {
  host: string;
  port: number;
}

/** Makes a pool of the app's kind (credentials, database, types, hooks) to another server. */
export type NodePoolFactory = (node: NodeAddress) => Sql;

/** How long a known route is trusted before it is looked up again; a refusal forgets it at once. */
const ROUTE_TTL_MS = 30_000;
/** Routes kept at most, the oldest dropped first (as src/auth/cache.ts's LiveCache). */
const MAX_ROUTES = 10_000;

/**
 * Where an account's one-statement requests go (src/contacts/fast-path.ts): on a Citus cluster, the
 * node that holds the account's shards, so that each runs there alone. A statement on one
 * distributed table that enters on another node costs that node the distributed planning and the
 * remote call, and the account's node the remote session's work: 450 µs of database CPU per GET
 * over the cluster against 77 µs entered on the account's node (pgbench,
 * bench/findings/2026-11-29-one-table-statements-on-account-node.md). Any node gives the same
 * answers: the writes' checks and lock run with the row, on its node
 * (sql/migrations/0018_static_write_checks.sql).
 *
 * `for` never waits: an account whose node is not known yet (or any more) gets the app's pool, which
 * is always correct, and its node is looked up beside the request. On one PostgreSQL, or without a
 * pool factory (tests that build the app alone), every account gets the app's pool.
 *
 * A route goes stale when a rebalance moves the account's shards. Then its statements still run right
 * (Citus routes them on), at the remote call's cost, until the route is looked up again: after
 * ROUTE_TTL_MS, or at once after a write the fast path could not make (`forget`).
 */
export class AccountNodes {
  private citus: boolean | undefined;
  private checking: Promise<void> | undefined;
  private readonly pools = new Map<string, Sql>();
  private readonly routes = new Map<string, { pool: Sql; until: number }>();
  private readonly lookingUp = new Set<string>();
  /** Pools that have answered a statement (see resolve). */
  private readonly ready = new WeakSet<Sql>();
  /**
   * Where routes are looked up: a connection of its own to the app's node, closed when idle, so that
   * a lookup never takes a place in (or shows among the statements of) the app's pool.
   */
  private lookup: Sql | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly connectNode?: NodePoolFactory,
    stop?: AbortSignal,
  ) {
    stop?.addEventListener('abort', () => {
      const pools = [...this.pools.values(), ...(this.lookup ? [this.lookup] : [])];
      this.pools.clear();
      this.lookup = undefined;
      this.routes.clear();
      for (const pool of pools) if (pool !== this.sql) void pool.end({ timeout: 1 }).catch(() => {});
    });
  }

  /** The pool for the account's one-statement requests. */
  for(accountId: string): Sql {
    if (!this.connectNode || this.citus === false) return this.sql;
    const route = this.routes.get(accountId);
    if (route && route.until > Date.now()) return route.pool;
    this.lookUp(accountId);
    return route?.pool ?? this.sql;
  }

  /** The pool for the account once its node is looked up (tests and tools; requests use `for`). */
  async resolved(accountId: string): Promise<Sql> {
    await this.resolve(accountId);
    return this.for(accountId);
  }

  /** The account's route is not trusted any more (a write it sent there was refused). */
  forget(accountId: string): void {
    this.routes.delete(accountId);
  }

  private lookUp(accountId: string): void {
    if (this.lookingUp.has(accountId)) return;
    this.lookingUp.add(accountId);
    this.resolve(accountId)
      .catch((error: unknown) => {
        log('warn', "could not look up or reach an account's node; its requests use the API's own", {
          accountId,
          ...errorFields(error),
        });
        // The app's own node until the route is due again: a node this API cannot reach (an address
        // in pg_dist_node it has no way to) is not tried again on every request.
        this.route(accountId, this.sql);
      })
      .finally(() => this.lookingUp.delete(accountId));
  }

  private async resolve(accountId: string): Promise<void> {
    this.checking ??= this.checkCitus();
    await this.checking;
    if (!this.citus) return;
    const [node] = await this.lookupConnection()<NodeAddress[]>`
      select n.nodename as host, n.nodeport as port
      from pg_dist_placement p join pg_dist_node n on n.groupid = p.groupid
      where p.shardid = get_shard_id_for_distribution_column('contacts', ${accountId}::uuid)
        and n.noderole = 'primary' and n.isactive`;
    if (!node) return;
    const pool = this.poolOf(node);
    // A new pool is used first here: postgres.js learns the server's array types on its first
    // connection, and an array parameter (sql.array) made before that is sent as text
    // (porsager/postgres#789: "malformed array literal"). The app's own pool has served requests.
    if (pool !== this.sql && !this.ready.has(pool)) {
      await pool`select 1`;
      this.ready.add(pool);
    }
    this.route(accountId, pool);
  }

  private route(accountId: string, pool: Sql): void {
    this.routes.delete(accountId);
    if (this.routes.size >= MAX_ROUTES) this.routes.delete(this.routes.keys().next().value!);
    this.routes.set(accountId, { pool, until: Date.now() + ROUTE_TTL_MS });
  }

  private async checkCitus(): Promise<void> {
    try {
      const [row] = await this.lookupConnection()<{ distributed: boolean }[]>`
        select exists (select 1 from pg_extension where extname = 'citus')
               and is_distributed('contacts') as distributed`;
      this.citus = row!.distributed;
    } catch (error) {
      this.checking = undefined;
      throw error;
    }
  }

  private lookupConnection(): Sql {
    this.lookup ??= connectBeside(this.sql, 'own', { idle_timeout: 5 });
    return this.lookup;
  }

  private poolOf(node: NodeAddress): Sql {
    const own = this.sql.options;
    if (own.host[0] === node.host && own.port[0] === node.port) return this.sql;
    const name = `${node.host}:${node.port}`;
    let pool = this.pools.get(name);
    if (!pool) {
      pool = this.connectNode!(node);
      this.pools.set(name, pool);
    }
    return pool;
  }
}

import { connectBeside, keepListening, type AnySql, type KeptListener, type Sql } from '../db';
import { errorFields, log } from '../log';

/**
 * In-process caches of rows that almost never change (API key rows, account schemas), kept fresh by
 * PostgreSQL notifications and never trusted on their own.
 *
 * Why a notification cannot be enough: NOTIFY is delivered after commit, asynchronously. A client
 * that revokes a key (COMMIT returned) and then calls the API can reach the API before the
 * notification does (test/auth/cache.test.ts catches a cache that trusts itself within a few rounds), so
 * a cache that answered on its own would let that call through. No amount of listening closes that
 * race for sequential clients.
 *
 * So a cached entry carries the account's counter from cache_versions (sql/migrations/
 * 0002_cache_invalidation.sql) read in the same snapshot as the entry; every change of the account,
 * of one of its keys or of its schema moves that counter in the changing transaction (cacheChanged). A request
 * served from the cache does its work in one statement that reads the counter again and does
 * nothing unless it is unchanged (src/contacts/fast-path.ts). That statement's snapshot is taken
 * after the request arrived, hence after any change the client committed before sending it, so the
 * change is seen: the request then falls back to the uncached path, which reads the rows afresh and
 * answers 401/403 or validates against the new schema. The cache is never used to refuse: a key it
 * does not vouch for goes through the full check. Notifications only make the fallback rare: a
 * changed entry is dropped within milliseconds of the commit, not at the end of its TTL.
 *
 * Listening: every time the listener (re)connects every cache is cleared (notifications may have
 * been missed while it was away), and nothing is cached before the first LISTEN succeeded. A lost
 * listening connection is listened on again until it is back (keepListening, src/db/keep-listening.ts).
 * Entries expire after CACHE_TTL_MS whatever happens.
 */
export const INVALIDATION_CHANNEL = 'cache_invalidation';
export const CACHE_TTL_MS = 30_000;
const MAX_ENTRIES = 10_000;
/** How often a listening app looks for cluster nodes added since it last looked. */
const NODE_CHECK_MS = 30_000;

/** A map whose entries expire, can be dropped by key or by group, and refuse stale fills. */
export class LiveCache<V> {
  private readonly entries = new Map<string, { value: V; group: string; expires: number }>();
  private generation = 0;
  /** False until the invalidation listener is up: nothing is stored or served before. */
  live = false;

  constructor(private readonly ttlMs = CACHE_TTL_MS) {}

  /**
   * Take this before reading what will be stored and hand it to set(): a fill whose read started
   * before an invalidation is discarded, since it may carry the value the invalidation was about.
   */
  get epoch(): number {
    return this.generation;
  }

  get(key: string): V | undefined {
    if (!this.live) return undefined;
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expires > Date.now()) return entry.value;
    this.entries.delete(key);
    return undefined;
  }

  set(key: string, value: V, epoch: number, group = key): void {
    if (!this.live || epoch !== this.generation) return;
    this.entries.delete(key);
    // Oldest first: Map iteration follows insertion order.
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value, group, expires: Date.now() + this.ttlMs });
  }

  delete(key: string): void {
    this.generation++;
    this.entries.delete(key);
  }

  deleteGroup(group: string): void {
    this.generation++;
    for (const [key, entry] of this.entries) if (entry.group === group) this.entries.delete(key);
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
  }
}

/** What changed: a key of an account (keyId names it), the account row, or its custom attributes. */
export type CachedTable = 'api_keys' | 'accounts' | 'schema_attributes';

/**
 * Every writer of a cached row calls this in the transaction of its change (the admin CLI, the
 * API's schema changes): it moves the account's counter, so no cache trusts the old row from the
 * commit on, and notifies the listening processes (sql/migrations/0006_cache_changes.sql). A
 * database function, so that a change made by hand in SQL can call it too.
 */
export async function cacheChanged(sql: AnySql, accountId: string, what: CachedTable, keyId?: string): Promise<void> {
  await sql`select cache_changed(${accountId}::uuid, ${what}, ${keyId ?? null}::uuid)`;
}

export interface Invalidation {
  table: string;
  accountId?: string;
  keyId?: string;
}

/**
 * LISTENs on the invalidation channel and hands each notification to `onChange`; `onReset` runs on
 * every (re)connect of a listening connection. Started on first use, so an app that never
 * authenticates never opens a connection; from then on it keeps listening through lost connections
 * and restarts (keepListening), until `stop` is aborted.
 *
 * A NOTIFY reaches only the listeners of the PostgreSQL server it was sent on, and on a Citus
 * cluster a change is made on whichever node its writer is connected to (the admin CLI, an API
 * replica's schema change): API replicas may connect to any node (docs/scaling-out.md). So once
 * its own connection listens, the listener also listens on every other primary node of the
 * cluster (pg_dist_node), with the app's credentials, one connection each, and looks for nodes
 * added since every NODE_CHECK_MS. A node listener's (re)connect also runs `onReset`: whatever was
 * notified there while it was away is forgotten with the caches. On one PostgreSQL there is no
 * other node.
 */
export class InvalidationListener {
  private own: KeptListener | undefined;
  /** Listen-only connections to the cluster's other nodes, by `host:port`. */
  private readonly nodes = new Map<string, KeptListener>();
  /**
   * Where the nodes are looked up: a connection of its own to the app's node, closed when idle, so
   * that the lookup never takes a place in (or shows among the statements of) the app's pool.
   */
  private lookup: Sql | undefined;
  private nodesCheckAt = 0;
  private checkingNodes = false;

  constructor(
    private readonly sql: Sql,
    private readonly onChange: (change: Invalidation | undefined) => void,
    private readonly onReset: () => void,
    /** Ends every listening connection, and listens on no new one, once aborted. */
    private readonly stop?: AbortSignal,
  ) {
    stop?.addEventListener('abort', () => {
      const listeners = [...(this.own ? [this.own] : []), ...this.nodes.values()];
      this.nodes.clear();
      for (const listener of listeners) void listener.end();
      void this.lookup?.end({ timeout: 1 }).catch(() => {});
      this.lookup = undefined;
    });
  }

  ensureStarted(): void {
    if (this.stop?.aborted) return;
    if (this.own) {
      if (this.own.listening) this.followNodes();
      return;
    }
    // Tests pass stand-ins for an unreachable database that have no listen().
    if (typeof this.sql.listen !== 'function') return;
    this.own = this.listenOn();
  }

  private listenOn(node?: { host: string; port: number }): KeptListener {
    return keepListening(
      this.sql,
      INVALIDATION_CHANNEL,
      { onNotify: (payload) => this.onChange(parse(payload)), onListen: () => this.onReset() },
      { what: 'cache invalidation listener', ...(node && { node }) },
    );
  }

  /** Listens on the cluster's nodes not listened on yet; at most every NODE_CHECK_MS. */
  private followNodes(): void {
    if (this.checkingNodes || Date.now() < this.nodesCheckAt) return;
    this.checkingNodes = true;
    this.nodesCheckAt = Date.now() + NODE_CHECK_MS;
    const own = this.sql.options;
    this.lookup ??= connectBeside(this.sql, 'own', { idle_timeout: 5 });
    clusterNodes(this.lookup)
      .then((nodes) => {
        if (this.stop?.aborted) return;
        // One PostgreSQL: no other node now, nor later (Citus is not added to a running database).
        if (nodes === undefined) this.nodesCheckAt = Infinity;
        const names = new Set<string>();
        for (const { host, port } of nodes ?? []) {
          const name = `${host}:${port}`;
          names.add(name);
          if (this.nodes.has(name) || (own.host[0] === host && own.port[0] === port)) continue;
          this.nodes.set(name, this.listenOn({ host, port }));
        }
        // A node removed from the cluster is not listened on for ever.
        for (const [name, listener] of this.nodes)
          if (!names.has(name)) {
            this.nodes.delete(name);
            void listener.end();
          }
      })
      .catch((error: unknown) => log('warn', 'cache invalidation could not list the cluster nodes', errorFields(error)))
      .finally(() => {
        this.checkingNodes = false;
      });
  }
}

/** The primary nodes of a Citus cluster (coordinator, workers) at the addresses it knows; undefined without Citus. */
async function clusterNodes(sql: Sql): Promise<{ host: string; port: number }[] | undefined> {
  const [citus] = await sql`select 1 from pg_extension where extname = 'citus'`;
  if (!citus) return undefined;
  return sql<{ host: string; port: number }[]>`
    select nodename as host, nodeport as port from pg_dist_node where noderole = 'primary' and isactive`;
}

function parse(payload: string): Invalidation | undefined {
  try {
    const value = JSON.parse(payload) as Invalidation;
    return typeof value?.table === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

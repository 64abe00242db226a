/**
 * On a Citus cluster (the second pass of test/run.ts): every account-scoped table is hash-distributed
 * by account_id and colocated with contacts, accounts, api_keys and the fast path's checked tables are reference
 * tables, and an
 * import's staging is distributed the same way, so a multi-batch import of two accounts whose shards
 * sit on different workers writes each account's contacts on its own worker, exact.
 */
import { beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { LiveCache } from '../../src/auth/cache';
import { ContactFastPath } from '../../src/contacts/fast-path';
import { AccountNodes, connect, type Sql, type Tx } from '../../src/db';
import { holdContactWrites } from '../../src/contacts/write-guard';
import { runImport } from '../../worker/import/index';
import { partStatements } from '../../worker/import/merge/sql-files';
import { releaseStaging, stagingFor } from '../../worker/import/staging-pool';
import { stagingTables } from '../../worker/import/staging';
import { importRow, stageImport, testConfig } from '../helpers/file-store';
import { createAccount, createBrand, createKey } from '../helpers/fixtures';
import { importBed } from '../helpers/import-bed';

const bed = importBed();

const ACCOUNT_TABLES = [
  'brand_subscribe_events',
  'brands',
  'contact_erasures',
  'contact_exports',
  'contact_imports',
  'contact_tallies',
  'contacts',
  'event_feed_heads',
  'schema_attributes',
  'seed_addresses',
  'suppression_imports',
  'suppression_lists',
  'suppression_records',
  'webhook_endpoints',
];

/** Read on every node by the fast path's checks (sql/migrations/0017, 0018): reference tables. */
const CHECKED = ['bulk_operations', 'cache_versions'];

beforeAll(async () => {
  const [citus] = await bed.db.sql`select 1 from pg_extension where extname = 'citus'`;
  if (!citus) throw new Error('test/cluster/ runs on a Citus cluster: CITUS_WORKERS=2 bun test/run.ts test/cluster');
});

describe('distribution', () => {
  test('account tables by account_id, colocated; accounts, api_keys, checked tables reference', async () => {
    const sql = bed.db.sql;
    const withAccount = await sql<{ t: string }[]>`
      select c.relname as t from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = 'public' and c.relkind = 'r' and c.relname not like 'import\\_%'
        and exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'account_id')
      order by 1`;
    expect(withAccount.map((r) => r.t)).toEqual([...ACCOUNT_TABLES, ...CHECKED, 'api_keys', 'staging_sets'].sort());

    const rows = await sql<{ t: string; method: string; column: string | null; colocated: boolean }[]>`
      select logicalrelid::text as t, partmethod as method,
             column_to_column_name(logicalrelid, partkey) as column,
             colocationid = (select colocationid from pg_dist_partition where logicalrelid = 'contacts'::regclass)
               as colocated
      from pg_dist_partition order by 1`;
    const byTable = Object.fromEntries(rows.map((r) => [r.t, r]));
    for (const t of ACCOUNT_TABLES)
      expect(byTable[t]).toEqual({ t, method: 'h', column: 'account_id', colocated: true });
    const REFERENCE = ['accounts', 'api_keys', ...CHECKED, 'staging_sets'];
    for (const t of REFERENCE) expect(byTable[t]).toMatchObject({ t, method: 'n', column: null });
    const [ref] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_dist_partition
      where logicalrelid::text = any(${REFERENCE}) and repmodel = 't'`;
    expect(ref!.n).toBe(REFERENCE.length);
  });

  test("the outbox's md5 and address sets are lz4-compressed on every shard (0009, 0011 reached them)", async () => {
    const sql = bed.db.sql;
    const shards = await sql<{ result: string }[]>`
      select result from run_command_on_shards('brand_subscribe_events', $$
        select string_agg(attcompression::text, ',' order by attname) from pg_attribute
        where attrelid = '%s'::regclass and attname in ('email_md5s', 'emails')$$)`;
    expect(shards.length).toBe(32);
    expect(new Set(shards.map((s) => s.result))).toEqual(new Set(['l,l']));
  });
});

describe('an import on the cluster', () => {
  test('two accounts on different workers: each multi-batch import lands on its own worker, exact', async () => {
    const sql = bed.db.sql;
    // Accounts whose shards sit on different workers (account_id decides the shard).
    const nodeOf = async (account: string) => {
      const [r] = await sql<{ port: number }[]>`
        select nodeport as port from citus_shards
        where table_name = 'contacts'::regclass
          and shardid = get_shard_id_for_distribution_column('contacts', ${account}::uuid)`;
      return r!.port;
    };
    const accounts: string[] = [];
    const ports = new Set<number>();
    while (accounts.length < 2) {
      const id = await createAccount(sql);
      const port = await nodeOf(id);
      if (!ports.has(port)) {
        ports.add(port);
        accounts.push(id);
      }
    }

    const ROWS = 2_500;
    for (const [k, account] of accounts.entries()) {
      const lines = Array.from({ length: ROWS }, (_, i) => `a${k}-${i}@example.com`);
      // Every tenth email twice: the dedupe keeps one.
      const csv = `Email\n${[...lines, ...lines.filter((_, i) => i % 10 === 0)].join('\n')}\n`;
      const id = await stageImport(sql, bed.files.store, account, csv, { columns: ['Email'] });
      await runImport({ sql, storage: bed.files.store, config: testConfig(1_000) }, account, id);
      expect(await importRow(sql, account, id)).toMatchObject({
        status: 'success',
        addedCount: ROWS,
        updatedCount: 0,
        duplicateInFileCount: ROWS / 10,
      });
    }

    // Each worker holds exactly its account's contacts, read from its own shards.
    for (const account of accounts) {
      const [placed] = await sql<{ n: number }[]>`
        select result::int as n from run_command_on_shards('contacts',
          format('select count(*) from %s where account_id = %L', '%s', ${account}::text))
        where shardid = get_shard_id_for_distribution_column('contacts', ${account}::uuid)`;
      expect(placed!.n).toBe(ROWS);
      const [total] = await sql<{ n: number }[]>`select count(*)::int as n from contacts where account_id = ${account}`;
      expect(total!.n).toBe(ROWS);
    }
    expect(ports.size).toBe(2);
    // The general merge on the cluster: the same file again with a brand for every row, so each row
    // is an update that assigns it, with its event.
    const [again] = accounts;
    const brand = await createBrand(sql, again!, 'Cluster');
    const lines = Array.from({ length: ROWS }, (_, i) => `a0-${i}@example.com`);
    const id = await stageImport(sql, bed.files.store, again!, `Email\n${lines.join('\n')}\n`, {
      columns: ['Email'],
      brandIds: [brand],
    });
    await runImport({ sql, storage: bed.files.store, config: testConfig(1_000) }, again!, id);
    expect(await importRow(sql, again!, id)).toMatchObject({ status: 'success', addedCount: 0, updatedCount: ROWS });
    const [events] = await sql<{ n: number }[]>`
      select coalesce(sum(cardinality(email_md5s)), 0)::int as n from brand_subscribe_events
      where account_id = ${again!} and import_id = ${id} and brand_id = ${brand}`;
    expect(events!.n).toBe(ROWS);
    const [branded] = await sql<{ n: number }[]>`
      select count(*)::int as n from contacts where account_id = ${again!} and brand_ids = array[${brand}::uuid]`;
    expect(branded!.n).toBe(ROWS);

    // Nothing of the imports' staging is left: no set held, every table of the pool empty and
    // distributed like the contacts (worker/import/staging-pool.ts), no table of an import's own.
    const sets = await sql<{ id: string; importId: string | null }[]>`
      select id, import_id as "importId" from staging_sets`;
    expect(sets.length).toBeGreaterThan(0);
    expect(sets.filter((x) => x.importId !== null)).toEqual([]);
    const pooled = await sql<{ t: string; colocated: boolean }[]>`
      select logicalrelid::text as t,
             colocationid = (select colocationid from pg_dist_partition where logicalrelid = 'contacts'::regclass)
               as colocated
      from pg_dist_partition where logicalrelid::text like 'import\\_%' order by 1`;
    const expected = sets.flatMap(({ id }) => {
      const t = stagingTables(id);
      return [t.rows, t.repeats, t.repeatRows, t.rejects, ...t.parts.flatMap((x) => [x.table, x.plan])];
    });
    expect([...pooled]).toEqual(expected.sort().map((t) => ({ t, colocated: true })));
    for (const table of expected) {
      const [left] = await sql.unsafe<{ n: number }[]>(`select count(*)::int as n from ${table}`);
      expect([table, left!.n]).toEqual([table, 0]);
    }
  }, 120_000);
});

describe('the merge statements on the cluster', () => {
  test('on the node of the account: one task each, no repartition; only outbox rows pass the coordinator', async () => {
    const sql = bed.db.sql;
    const account = await createAccount(sql);
    const importId = crypto.randomUUID();
    // A set of the staging pool, as an import's run claims it (worker/import/staging-pool.ts).
    const t = (await stagingFor(sql, { id: importId, accountId: account })).tables;
    const { table: part, plan } = t.parts[0]!;
    // The merge table as the dedupe leaves it (worker/import/dedupe.ts), with a few rows.
    await sql.unsafe(
      `insert into ${part}
       select $1::uuid, n, md5(n || '@example.com')::uuid, n, n || '@example.com', '{}', '{}', 0
       from generate_series(1, 100) n`,
      [account],
    );
    const form = { distributed: true, recordSkips: true, publishEvents: true };
    const statements = await partStatements({ merge: part, plan, rejects: t.rejects }, form);
    // With the values written in: Citus cannot EXPLAIN a statement it plans through the coordinator
    // while its parameters are still parameters (it runs them, bound, all the same: the imports above).
    const explain = async (statement: string, params: unknown[]) => {
      const literal = statement.replace(/\$(\d+)::/g, (_, k: string) => `'${String(params[Number(k) - 1])}'::`);
      const rows = await sql.unsafe<{ 'QUERY PLAN': string }[]>(`explain ${literal}`);
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    };
    const range = [account, 0, 100];
    const { insert } = statements;
    const merge = statements.merge.split!; // a cluster's batches plan into a table
    const statementsToCheck: [string, string, unknown[]][] = [
      ['clash', statements.clash, range],
      ['merge.plan', merge.plan, [...range, 'overwrite', false, false, true]],
      ['merge.skips', merge.skips, range],
      ['merge.write', merge.write, [...range, importId, 'api']],
      ['merge.events', merge.events, [...range, importId]],
      ['merge.counts', merge.counts, range],
      ['merge.clear', merge.clear, range],
      ['insert.insert', insert.insert, [...range, importId, 'api']],
      ['insert.events', insert.events, [...range, importId]],
    ];
    const plans: string[] = [];
    for (const [name, statement, params] of statementsToCheck) {
      plans.push(
        await explain(statement, params).catch((e: Error) => {
          throw new Error(`${name}: ${e.message}`);
        }),
      );
    }
    for (const [k, p] of plans.entries()) {
      const name = statementsToCheck[k]![0];
      expect([name, p]).toEqual([name, expect.stringMatching(/Task Count: 1\n/)]);
      expect([name, p]).toEqual([name, expect.not.stringMatching(/repartition|Distributed Subplan/i)]);
      // The outbox's identity column takes its value on the coordinator: the events' SELECT (their
      // grouping included) runs on the node, its rows (one per brand) come back to be inserted.
      const pulled = /pull to coordinator/.test(p);
      expect([name, pulled]).toEqual([name, name.endsWith('.events')]);
    }
    await releaseStaging(sql, importId, 4);
  });
});

/**
 * The API's fast path for a new account with a key, sending the account's statements to the node of
 * its shards (src/db/account-nodes.ts) on connections that record every statement they send, and the
 * plan Citus makes of such a statement there.
 */
async function recordingFastPath() {
  const account = await createAccount(bed.db.sql);
  await createKey(bed.db.sql, account);
  const sent: { query: string; params: unknown[]; on: 'app' | 'node' }[] = [];
  const record = (on: 'app' | 'node') => (_c: number, query: string, params: unknown[]) =>
    sent.push({ query, params, on });
  const sql = connect(bed.db.url, 1, { debug: record('app') });
  const opened: Sql[] = [];
  const nodes = new AccountNodes(sql, (node) => {
    const pool = connect(bed.db.url, 1, { node, debug: record('node') });
    opened.push(pool);
    return pool;
  });
  const node = await nodes.resolved(account);
  const [versions] = await sql<{ v: [number, number] }[]>`select contact_versions(${account}::uuid) as v`;
  const claim = {
    auth: { accountId: account, keyId: 'test', scopes: [] },
    keysVersion: Number(versions!.v[0]),
    rateLimit: null,
  };
  // The plan, and what Citus's planner says of it (DEBUG2 names its fast path for one-table statements).
  const planOf = async (statement: { query: string; params: unknown[] }) => {
    const said: string[] = [];
    const { host, port } = node.options;
    const at = postgres(bed.db.url, {
      host: host[0],
      port: port[0],
      max: 1,
      onnotice: (n) => said.push(String(n.message)),
    });
    try {
      return await at.begin(async (tx) => {
        await tx`set local client_min_messages to debug2`;
        const rows = await tx.unsafe<{ 'QUERY PLAN': string }[]>(
          `explain (costs off) ${statement.query}`,
          statement.params as never,
        );
        return { plan: rows.map((r) => r['QUERY PLAN']).join('\n'), said: said.join('\n') };
      });
    } finally {
      await at.end();
    }
  };
  const end = async () => {
    for (const pool of [sql, ...opened]) await pool.end();
  };
  return { account, sql, node, sent, claim, fast: new ContactFastPath(sql, new LiveCache(), nodes), planOf, end };
}

const md5Hex = (s: string) => Bun.MD5.hash(s.toLowerCase(), 'hex') as string;

/**
 * The fast path's plans: Citus's fast path, one task, on contacts alone (no join, nothing pulled).
 * Citus's planner names its fast path at DEBUG2 for a SELECT, UPDATE or DELETE; every INSERT …
 * VALUES takes it (fast_path_router_planner.c: "all INSERTs are fast-path"), of which it says only
 * "Creating router plan", and an INSERT … SELECT never does (its plan is "Citus INSERT … SELECT").
 */
function expectOneShardFastPlan({ plan, said }: { plan: string; said: string }, scan: RegExp) {
  if (/^Custom Scan \(Citus Adaptive\)/.test(plan) && /Insert on/.test(plan))
    expect(said).toMatch(/Creating router plan/);
  // "Distributed planning for …", or "Deferred pruning for …" when the account is a parameter.
  else expect(said).toMatch(/(Distributed planning|Deferred pruning) for a fast-path router query/);
  expect(plan).toMatch(/^Custom Scan \(Citus Adaptive\)\n/);
  expect(plan).toMatch(/Task Count: 1\n/);
  expect(plan).toMatch(scan);
  expect(plan).not.toMatch(/Distributed Subplan|pull to coordinator|repartition|Join|INSERT \.\.\. SELECT/i);
}

describe('the API fast path on the cluster', () => {
  test("a POST's create is one INSERT on the account's node: no subplan, nothing via the coordinator", async () => {
    // Citus plans an INSERT … SELECT that calls a volatile function through the coordinator (a subplan,
    // the row copied to every worker, a two-phase commit over them): the create must not be one.
    const { account, sql, sent, claim, fast, planOf, end } = await recordingFastPath();
    try {
      const brand = await createBrand(bed.db.sql, account, 'Fast');
      // Without brands, and with one whose subscribe event is written in the same transaction.
      const plain = `fast-${crypto.randomUUID()}@example.com`;
      const branded = `fast-${crypto.randomUUID()}@example.com`;
      expect(await fast.create(claim, { email: plain })).toMatchObject({ email: plain });
      expect(await fast.create(claim, { email: branded, brandIds: [brand] })).toMatchObject({
        brandIds: [brand],
      });
      const [events] = await sql<{ n: number }[]>`
        select count(*)::int as n from brand_subscribe_events where account_id = ${account} and brand_id = ${brand}`;
      expect(events!.n).toBe(1);
      const inserts = sent.filter((s) => /^\s*insert into contacts/i.test(s.query));
      expect(inserts.map((s) => s.on)).toEqual(['node', 'node']);
      for (const insert of inserts) expectOneShardFastPlan(await planOf(insert), /Insert on contacts_\d+/);
    } finally {
      await end();
    }
  });

  test("a PATCH is one UPDATE of contacts alone on the account's node, its checks and lock in a function", async () => {
    const { account, sent, claim, fast, planOf, end } = await recordingFastPath();
    try {
      await bed.db.sql`insert into schema_attributes (account_id, name, type) values (${account}, 'nick', 'string')`;
      const email = `patch-${crypto.randomUUID()}@example.com`;
      const created = await fast.create(claim, { email });
      expect(await fast.patch(claim, created!.emailMd5, { nick: 'Ann' })).toMatchObject({
        attributes: { nick: 'Ann' },
      });
      const updates = sent.filter((s) => /\bupdate contacts\b/i.test(s.query));
      expect(updates.map((s) => s.on)).toEqual(['node']);
      expectOneShardFastPlan(await planOf(updates[0]!), /Update on contacts_\d+/);
    } finally {
      await end();
    }
  });

  test("a GET is one SELECT of contacts alone on the account's node, its counters read there", async () => {
    const { sent, claim, fast, planOf, end } = await recordingFastPath();
    try {
      const email = `get-${crypto.randomUUID()}@example.com`;
      const created = await fast.create(claim, { email });
      expect(await fast.get(claim, created!.emailMd5)).toMatchObject({ email });
      const reads = sent.filter((s) => /contact_versions\(account_id\)/.test(s.query));
      expect(reads.map((s) => s.on)).toEqual(['node']);
      expectOneShardFastPlan(await planOf(reads[0]!), /Index Scan using contacts_pkey_\d+ on contacts_\d+/);
    } finally {
      await end();
    }
  });

  test("a PATCH that removes an attribute as the first statement on a new node's pool", async () => {
    // Its removals are an array parameter: postgres.js sends one made before the pool's first
    // connection learned the array types as text ("malformed array literal"), so AccountNodes
    // answers with a pool that has run a statement (src/db/account-nodes.ts).
    const { account, claim, fast, end } = await recordingFastPath();
    try {
      await bed.db.sql`insert into schema_attributes (account_id, name, type) values (${account}, 'nick', 'string')`;
      const email = `first-${crypto.randomUUID()}@example.com`;
      await bed.db.sql`
        insert into contacts (account_id, email_md5, email, attributes, first_source)
        values (${account}, md5(${email})::uuid, ${email}, '{"nick": "Ann"}', 'api')`;
      const md5 = (await bed.db.sql<{ m: string }[]>`select md5(${email}) as m`)[0]!.m;
      expect(await fast.patch(claim, md5, { nick: null })).toMatchObject({ email, attributes: {} });
    } finally {
      await end();
    }
  });

  test("a node the API cannot reach: the account's requests use the API's node, not retried each time", async () => {
    // A port nothing listens on: the address pg_dist_node gives is not one this API can reach. Every
    // request still succeeds, and the node is tried once per route period (each use of its pool
    // counted).
    const closed = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
    const port = closed.port;
    closed.stop(true);
    let attempts = 0;
    const account = await createAccount(bed.db.sql);
    await createKey(bed.db.sql, account);
    const sql = connect(bed.db.url, 2);
    const opened: Sql[] = [];
    const nodes = new AccountNodes(sql, () => {
      const pool = connect(bed.db.url, 1, { node: { host: '127.0.0.1', port }, connectTimeout: 1 });
      opened.push(pool);
      return new Proxy(pool, {
        apply: (target, self, args) => (attempts++, Reflect.apply(target, self, args)),
      });
    });
    try {
      const [versions] = await sql<{ v: [number, number] }[]>`select contact_versions(${account}::uuid) as v`;
      const claim = {
        auth: { accountId: account, keyId: 'test', scopes: [] },
        keysVersion: Number(versions!.v[0]),
        rateLimit: null,
      };
      const fast = new ContactFastPath(sql, new LiveCache(), nodes);
      const email = `unreachable-${crypto.randomUUID()}@example.com`;
      // The fast path's answer or undefined (the plain path's turn); never an error.
      await fast.create(claim, { email });
      for (let i = 0; i < 20; i++) {
        await fast.get(claim, md5Hex(email));
        await Bun.sleep(25);
      }
      expect(nodes.for(account)).toBe(sql);
      expect(attempts).toBeGreaterThanOrEqual(1);
      expect(attempts).toBeLessThanOrEqual(2);
    } finally {
      for (const pool of [sql, ...opened]) await pool.end({ timeout: 1 });
    }
  });

  test("a fast write entering any node is checked and locked on the account's node; a hold refuses it", async () => {
    const { account, claim, node, end } = await recordingFastPath();
    const nodes = await bed.db.sql<{ host: string; port: number }[]>`
      select nodename as host, nodeport as port from pg_dist_node where noderole = 'primary' and isactive`;
    const own = node.options;
    const email = `anynode-${crypto.randomUUID()}@example.com`;
    const md5 = (await bed.db.sql<{ m: string }[]>`select md5(${email})::uuid as m`)[0]!.m;
    const args = (q: Sql | Tx) => q`${account}::uuid, ${claim.keysVersion}::int8, 0`;
    // A create, then a patch, each in a transaction left open while the account's node is asked
    // for its locks: the write lock is held there, whichever node the statement entered.
    const write = async (at: Sql, create: boolean) =>
      (await at.begin(async (tx) => {
        const rows = create
          ? await tx`
              insert into contacts (account_id, email_md5, email, attributes, first_source)
              values (${account}, ${md5}, ${email}, '{}', 'api')
              returning contact_create_admitted(email_md5, ${args(tx)}) as ok`
          : await tx`
              update contacts set updated_at = now()
              where account_id = ${account} and email_md5 = ${md5}
                and contact_write_admitted(email_md5, ${args(tx)}, false)
              returning true as ok`;
        const [locks] = await node<{ n: number }[]>`
          select count(*)::int as n from pg_locks
          where locktype = 'advisory' and mode = 'ShareLock' and granted
            and objid = (hashtextextended(${account}::text, 0) & 4294967295)::oid`;
        return { rows: rows.length, lockedOnAccountNode: locks!.n > 0 };
      })) as { rows: number; lockedOnAccountNode: boolean };
    const hold = crypto.randomUUID();
    try {
      for (const [i, address] of nodes.entries()) {
        const at = connect(bed.db.url, 1, { node: address });
        try {
          const here = address.host === own.host[0] && address.port === own.port[0];
          // Created once (through the first node), patched through each.
          if (i === 0) expect(await write(at, true)).toEqual({ rows: 1, lockedOnAccountNode: true });
          expect({ here, ...(await write(at, false)) }).toEqual({ here, rows: 1, lockedOnAccountNode: true });
        } finally {
          await at.end();
        }
      }
      // A bulk operation of the account: refused through every node, the create with its code.
      await holdContactWrites(bed.db.sql, account, hold, 'schema-change', 60);
      for (const address of nodes) {
        const at = connect(bed.db.url, 1, { node: address });
        try {
          expect(await write(at, false)).toEqual({ rows: 0, lockedOnAccountNode: false });
          const refused = await at`
            insert into contacts (account_id, email_md5, email, attributes, first_source)
            values (${account}, md5(${`new-${email}`})::uuid, ${`new-${email}`}, '{}', 'api')
            returning contact_create_admitted(email_md5, ${args(at)}) as ok`.catch((e: { code?: string }) => e.code);
          expect(refused).toBe('CW001');
        } finally {
          await at.end();
        }
      }
    } finally {
      await bed.db.sql`delete from bulk_operations where account_id = ${account} and id = ${hold}`;
      await end();
    }
  });
});

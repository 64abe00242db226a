/**
 * On a Citus cluster each statement of a search, a count and the stats runs on the account's node
 * as one task (issue 56): the coordinator's plan of every one is a router plan of a single task,
 * whatever the filter holds, and the task runs on the node of the account's shards.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { customAttributes } from '../../src/schema/service';
import { parseFilter } from '../../src/search/filter';
import { countStatement, pageStatement, type Statement } from '../../src/search/statements';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { createAccount, createAttribute, createBrand } from '../helpers/fixtures';

let db: TestDatabase;
let account: string;
let brand: string;

beforeAll(async () => {
  db = await createTestDatabase();
  account = await createAccount(db.sql, 'search on the cluster');
  await createAttribute(db.sql, account, 'city', 'string');
  await createAttribute(db.sql, account, 'age', 'number');
  await createAttribute(db.sql, account, 'work', 'email');
  brand = await createBrand(db.sql, account, 'Red');
});

afterAll(async () => {
  await db?.drop();
});

interface Plan {
  'Node Type': string;
  'Distributed Query'?: { Job: { 'Task Count': number; Tasks?: { Node: string }[] } };
  Plans?: Plan[];
}

/** Every Citus custom scan of the plan, at any depth. */
function customScans(plan: Plan): Plan[] {
  const own = plan['Distributed Query'] ? [plan] : [];
  return [...own, ...(plan.Plans ?? []).flatMap(customScans)];
}

async function tasksOf({ text, args }: Statement): Promise<{ scans: number; tasks: number[]; nodes: string[] }> {
  const [row] = await db.sql.unsafe<{ 'QUERY PLAN': { Plan: Plan }[] }[]>(
    `explain (format json, verbose) ${text}`,
    args as never[],
  );
  const scans = customScans(row!['QUERY PLAN'][0]!.Plan);
  return {
    scans: scans.length,
    tasks: scans.map((s) => s['Distributed Query']!.Job['Task Count']),
    nodes: scans.flatMap((s) => (s['Distributed Query']!.Job.Tasks ?? []).map((t) => t.Node)),
  };
}

const FILTERS: [string, unknown][] = [
  ['none', undefined],
  ['a brand', { attribute: 'Brand', op: 'contains', value: '<brand>' }],
  [
    'a nested and/or/not over every kind of leaf',
    {
      and: [
        { enabled: true },
        { createdAt: { gte: '2020-01-01T00:00:00Z' } },
        {
          or: [
            { attribute: 'city', op: 'in', value: ['Oslo', 'Kyoto'] },
            { attribute: 'age', op: 'gt', value: 30 },
          ],
        },
        { not: { attribute: 'work:domain', op: 'eq', value: 'example.com' } },
        { attribute: 'Email', op: 'domain', value: 'example.org' },
      ],
    },
  ],
];

for (const [name, raw] of FILTERS) {
  test(`search page, later page and count with ${name}: one task each, on the account's node`, async () => {
    const filter = raw && JSON.parse(JSON.stringify(raw).replace('<brand>', brand));
    const custom = await customAttributes(db.sql, account);
    const node = filter === undefined ? undefined : parseFilter(filter, { custom });
    const [home] = await db.sql<{ port: number }[]>`
      select nodeport as port from citus_shards
      where table_name = 'contacts'::regclass
        and shardid = get_shard_id_for_distribution_column('contacts', ${account}::uuid)`;
    for (const statement of [
      pageStatement(account, node, undefined, 101),
      pageStatement(account, node, 'ffffffff-0000-0000-0000-000000000000', 101),
      countStatement(account, node),
    ]) {
      const { scans, tasks, nodes } = await tasksOf(statement);
      expect({ scans, tasks }).toEqual({ scans: 1, tasks: [1] });
      expect(nodes.every((n) => n.endsWith(`port=${home!.port} dbname=${new URL(db.url).pathname.slice(1)}`))).toBe(
        true,
      );
    }
  });
}

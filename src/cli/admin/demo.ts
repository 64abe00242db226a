import type { Sql, Tx } from '../../db';
import { AdminError, parseFlags, type Command } from './args';
import { addAttribute, type AttributeInput } from './attributes';
import { createBrand, type BrandInput } from './brands';
import { createKey } from './keys';
import { createSuppressionList, type ListFormat, type ListInput } from './suppression-lists';

export const DEMO_ACCOUNT_NAME = 'Demo account';
// Next to migrate's lock number; any constant works as long as every process uses the same one.
const DEMO_LOCK = 72_810_002;

const BRANDS: BrandInput[] = [
  {
    name: 'Acme News',
    enabled: true,
    fromAddress: 'news@acme.example',
    domain: 'mail.acme.example',
    esps: ['SendGrid', 'Mailgun'],
    verticals: [
      { id: 12, label: 'News' },
      { id: 31, label: 'Technology' },
    ],
    unsubscribePageId: '6b0f8a4e-3c1d-4b7a-9e2f-5d8c7a1b2e30',
    useListUnsubscribeHeader: true,
  },
  {
    name: 'Acme Deals',
    enabled: true,
    fromAddress: 'deals@acme.example',
    esps: ['Amazon SES'],
    verticals: [{ id: 7, label: 'Retail' }],
    useListUnsubscribeHeader: false,
  },
  { name: 'Legacy Brand', enabled: false, esps: [], verticals: [], useListUnsubscribeHeader: false },
];

const ATTRIBUTES: AttributeInput[] = [
  { name: 'firstName', type: 'string', description: 'Given name' },
  { name: 'altEmail', type: 'email', description: 'A second address; derives altEmail:md5, :sha256, :sha512, :domain' },
  { name: 'age', type: 'number' },
  { name: 'vip', type: 'boolean', description: 'Gets early access to offers' },
  { name: 'interests', type: 'array', description: 'Topics the contact picked' },
];

const LISTS: ListInput[] = [
  { name: 'Global unsubscribes', format: 'plain text', isGlobal: true },
  { name: 'Partner MD5 suppressions', format: 'md5', isGlobal: false },
  { name: 'Partner SHA-512 suppressions', format: 'sha512', isGlobal: false },
];

export interface DemoResult {
  accountId: string;
  key: string;
  keyId: string;
  brands: { id: string; name: string }[];
  attributes: string[];
  suppressionLists: { id: string; name: string; format: ListFormat }[];
}

async function findOrCreateAccount(tx: Tx): Promise<string> {
  const [found] = await tx<{ id: string }[]>`
    select id from accounts where name = ${DEMO_ACCOUNT_NAME} order by created_at, id limit 1`;
  if (found) return found.id;
  const [row] = await tx<{ id: string }[]>`insert into accounts (name) values (${DEMO_ACCOUNT_NAME}) returning id`;
  return row!.id;
}

async function findOrCreateBrand(tx: Tx, accountId: string, b: BrandInput): Promise<string> {
  const [found] = await tx<{ id: string }[]>`
    select id from brands where account_id = ${accountId} and lower(name) = lower(${b.name}) and deleted_at is null`;
  return found ? found.id : createBrand(tx, accountId, b);
}

async function findOrCreateList(tx: Tx, accountId: string, l: ListInput): Promise<string> {
  const [found] = await tx<{ id: string }[]>`
    select id from suppression_lists where account_id = ${accountId} and name = ${l.name}
    order by created_at, id limit 1`;
  return found ? found.id : createSuppressionList(tx, accountId, l);
}

/**
 * Creates the demo data, or reuses what an earlier run made (found by name), and issues a fresh
 * full-scope key each run. Runs in-process from `start` as well as from the CLI.
 */
export async function runDemo(sql: Sql): Promise<DemoResult> {
  // One transaction under a fixed lock, so two runs at once (two `start`s) share one demo account.
  const base = await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${DEMO_LOCK})`;
    const accountId = await findOrCreateAccount(tx);
    const brands: DemoResult['brands'] = [];
    for (const b of BRANDS) brands.push({ id: await findOrCreateBrand(tx, accountId, b), name: b.name });
    const suppressionLists: DemoResult['suppressionLists'] = [];
    for (const l of LISTS)
      suppressionLists.push({ id: await findOrCreateList(tx, accountId, l), name: l.name, format: l.format });
    const key = await createKey(tx, accountId);
    return { accountId, key: key.key, keyId: key.id, brands, suppressionLists };
  });
  // Attributes are schema changes: each commits its hold row before its own transaction, so they
  // cannot join the one above.
  const existing = new Set(
    (
      await sql<
        { name: string }[]
      >`select lower(name) as name from schema_attributes where account_id = ${base.accountId}`
    ).map((r) => r.name),
  );
  for (const a of ATTRIBUTES) {
    if (existing.has(a.name.toLowerCase())) continue;
    try {
      await addAttribute(sql, base.accountId, a);
    } catch (err) {
      // A concurrent run created it first: that is the reuse we want.
      if (!(err instanceof AdminError)) throw err;
    }
  }
  const { accountId, key, keyId, brands, suppressionLists } = base;
  return { accountId, key, keyId, brands, attributes: ATTRIBUTES.map((a) => a.name), suppressionLists };
}

export const demoCommands: Record<string, Command> = {
  demo: {
    usage: 'demo',
    prepare(argv) {
      parseFlags(argv, {});
      return (sql) => runDemo(sql);
    },
  },
};

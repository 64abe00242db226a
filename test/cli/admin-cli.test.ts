// The admin CLI as an operator runs it: a subprocess against a real database, one JSON object out.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { parseKey, sha256 } from '../../src/auth/keys';
import { ALL_SCOPES } from '../../src/auth/scopes';
import { parseFlags, UsageError } from '../../src/cli/admin/args';
import { withSchemaChangeHold } from '../../src/contacts/write-guard';
import { runAdmin } from '../helpers/admin-cli';
import { createTestDatabase, type TestDatabase } from '../helpers/db';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const NOBODY = '00000000-0000-4000-8000-000000000000';
let db: TestDatabase;
let account = '';

const run = (...args: string[]) => runAdmin(db.url, args);

/** Exit 0, nothing on stderr, exactly one JSON object on stdout. */
async function ok(...args: string[]): Promise<any> {
  const { out, err, code } = await run(...args);
  expect({ code, err }).toEqual({ code: 0, err: '' });
  expect(out.trimEnd().split('\n')).toHaveLength(1);
  return JSON.parse(out);
}

/** The given exit code, nothing on stdout, one line on stderr (no stack trace). */
async function fails(code: number, ...args: string[]): Promise<string> {
  const r = await run(...args);
  expect({ code: r.code, out: r.out }).toEqual({ code, out: '' });
  expect(r.err.trimEnd().split('\n')).toHaveLength(1);
  return r.err;
}

beforeAll(async () => {
  db = await createTestDatabase();
  account = (await ok('account', 'create', '--name', 'Admin CLI test')).id;
});
afterAll(() => db?.drop());

describe('flag parser', () => {
  const spec = { name: { kind: 'string' }, esp: { kind: 'list' }, off: { kind: 'boolean' } } as const;
  test('reads --flag value, --flag=value, repeated lists and booleans', () => {
    expect(parseFlags(['--name=a=b', '--esp', 'x', '--esp=y', '--off'], spec)).toEqual({
      name: 'a=b',
      esp: ['x', 'y'],
      off: true,
    });
    expect(parseFlags([], spec)).toEqual({ name: undefined, esp: [], off: false });
  });
  test.each([
    [['--nope', 'x']],
    [['--name']],
    [['--name', '--off']],
    [['--name', 'a', '--name', 'b']],
    [['--off=yes']],
    [['stray']],
  ])('%j is a usage error', (argv) => expect(() => parseFlags(argv, spec)).toThrow(UsageError));
});

describe('usage errors exit 2 before touching the database', () => {
  test.each([
    [[]],
    [['--help']],
    [['nope']],
    [['brand']],
    [['brand', 'create', '--account', NOBODY, '--bogus', 'x']],
    [['key', 'create', '--account', 'not-a-uuid']],
    [['account', 'create']],
    [['account', 'create', '--name']],
  ])('%j', async (argv) => {
    const r = await run(...argv);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err).not.toContain('    at ');
  });
});

describe('every account command checks the account', () => {
  test.each([
    [['account', 'suspend']],
    [['key', 'create']],
    [['key', 'list']],
    [['brand', 'create', '--name', 'B']],
    [['brand', 'delete', '--brand', NOBODY]],
    [['attribute', 'create', '--name', 'x', '--type', 'string']],
    [['suppression-list', 'create', '--name', 'L', '--format', 'md5']],
    [['seed', 'add', '--email', 'a@b.co']],
  ])('%j', async (cmd) => {
    expect(await fails(1, ...cmd, '--account', NOBODY)).toContain(`no account ${NOBODY}`);
  });
});

describe('account', () => {
  test('create stores the name; suspend sets suspended_at once', async () => {
    const { id } = await ok('account', 'create', '--name', 'Suspendable');
    expect(id).toMatch(UUID);
    expect(await ok('account', 'suspend', '--account', id)).toEqual({ id, suspended: true });
    const [first] = await db.sql`select name, suspended_at from accounts where id = ${id}`;
    expect(first!.name).toBe('Suspendable');
    expect(first!.suspended_at).toBeInstanceOf(Date);
    await ok('account', 'suspend', '--account', id.toUpperCase());
    const [again] = await db.sql`select suspended_at from accounts where id = ${id}`;
    expect(again!.suspended_at).toEqual(first!.suspended_at);
  });
});

describe('key', () => {
  test('create defaults to every scope and stores only the sha256 of the secret', async () => {
    const created = await ok('key', 'create', '--account', account);
    expect(created.scopes).toEqual([...ALL_SCOPES]);
    const parsed = parseKey(created.key)!;
    expect(parsed.id).toBe(created.id);
    const [row] = await db.sql`select secret_sha256, scopes from api_keys where id = ${created.id}`;
    expect(Buffer.from(row!.secret_sha256).equals(sha256(parsed.secret))).toBe(true);
  });
  test('--scopes limits the key; unknown scopes are refused', async () => {
    expect((await ok('key', 'create', '--account', account, '--scopes', 'contacts:read, brands:read')).scopes).toEqual([
      'contacts:read',
      'brands:read',
    ]);
    expect(
      await fails(2, 'key', 'create', '--account', account, '--scopes', 'contacts:read,contacts:delete'),
    ).toContain('contacts:delete');
  });
  test('list shows keys; revoke marks one revoked', async () => {
    const { id } = await ok('key', 'create', '--account', account);
    expect(await ok('key', 'revoke', '--key-id', id)).toEqual({ id, revoked: true });
    const { keys } = await ok('key', 'list', '--account', account);
    expect(keys.find((k: any) => k.id === id).revokedAt).toBeString();
    expect(keys.filter((k: any) => k.revokedAt === undefined).length).toBeGreaterThan(0);
    expect(await fails(1, 'key', 'revoke', '--key-id', NOBODY)).toContain('no key');
  });
});

describe('brand', () => {
  test('create stores every setting', async () => {
    const page = crypto.randomUUID();
    const { id } = await ok(
      'brand',
      'create',
      '--account',
      account,
      '--name',
      'Full Brand',
      '--disabled',
      '--from-address',
      'news@full.example',
      '--domain',
      'Mail.Full.example',
      '--esp',
      'SendGrid',
      '--esp=Mailgun',
      '--vertical',
      '12:News: daily',
      '--unsubscribe-page',
      page,
      '--list-unsubscribe-header',
    );
    const [b] = await db.sql`select * from brands where account_id = ${account} and id = ${id}`;
    expect(b).toMatchObject({
      name: 'Full Brand',
      enabled: false,
      from_address: 'news@full.example',
      domain: 'mail.full.example',
      unsubscribe_page_id: page,
      use_list_unsubscribe_header: true,
    });
    expect(b!.esps.map((e: any) => e.name)).toEqual(['SendGrid', 'Mailgun']);
    expect(b!.esps[0].id).toMatch(UUID);
    expect(b!.verticals).toEqual([{ id: 12, label: 'News: daily' }]);
  });
  test('defaults: enabled, no ESPs, no verticals', async () => {
    const { id } = await ok('brand', 'create', '--account', account, '--name', 'Plain Brand');
    const [b] = await db.sql`select * from brands where account_id = ${account} and id = ${id}`;
    expect(b).toMatchObject({
      enabled: true,
      esps: [],
      verticals: [],
      from_address: null,
      use_list_unsubscribe_header: false,
    });
  });
  test('a live name is unique case-insensitively', async () => {
    expect(await fails(1, 'brand', 'create', '--account', account, '--name', 'PLAIN brand')).toContain(
      'already exists',
    );
  });
  test.each([
    [['--vertical', 'x:News']],
    [['--vertical', '12']],
    [['--vertical', '12:']],
    [['--unsubscribe-page', 'nope']],
    [['--from-address', 'not-an-email']],
    [['--domain', 'no spaces.com']],
  ])(
    'invalid %j is a usage error',
    async (extra) => void (await fails(2, 'brand', 'create', '--account', account, '--name', 'Bad', ...extra)),
  );
  test('delete is soft: contacts keep the id and the name is free again', async () => {
    const { id } = await ok('brand', 'create', '--account', account, '--name', 'Doomed');
    await db.sql`insert into contacts (account_id, email_md5, email, brand_ids, first_source)
      values (${account}, md5('c@d.co')::uuid, 'c@d.co', ${db.sql.array([id])}::uuid[], 'api')`;
    expect(await ok('brand', 'delete', '--account', account, '--brand', id)).toEqual({ id, deleted: true });
    const [b] = await db.sql`select deleted_at from brands where account_id = ${account} and id = ${id}`;
    expect(b!.deleted_at).toBeInstanceOf(Date);
    const [c] = await db.sql`select brand_ids from contacts where account_id = ${account} and email = 'c@d.co'`;
    expect(c!.brand_ids).toEqual([id]);
    await ok('brand', 'create', '--account', account, '--name', 'doomed');
    expect(await fails(1, 'brand', 'delete', '--account', account, '--brand', NOBODY)).toContain('no brand');
  });
});

describe('attribute', () => {
  test('creates one of each type in order, leaving no hold behind', async () => {
    for (const type of ['string', 'email', 'number', 'boolean', 'array']) {
      expect(
        await ok(
          'attribute',
          'create',
          '--account',
          account,
          '--name',
          `a_${type}`,
          '--type',
          type,
          '--description',
          `a ${type}`,
        ),
      ).toEqual({ name: `a_${type}` });
    }
    const rows = await db.sql`
      select name, type, description from schema_attributes where account_id = ${account} order by position`;
    expect(rows.map((r) => r.type)).toEqual(['string', 'email', 'number', 'boolean', 'array']);
    expect(rows[0]!.description).toBe('a string');
    expect(await db.sql`select 1 from bulk_operations where account_id = ${account}`).toHaveLength(0);
  });
  test.each([['Email'], ['brand'], ['a:b'], [' '], ['x'.repeat(256)]])('name #%# is refused', async (name) => {
    await fails(2, 'attribute', 'create', '--account', account, '--name', name, '--type', 'string');
  });
  test('bad type is a usage error; a duplicate name (any case) is refused', async () => {
    await fails(2, 'attribute', 'create', '--account', account, '--name', 'x', '--type', 'date');
    expect(
      await fails(1, 'attribute', 'create', '--account', account, '--name', 'A_STRING', '--type', 'string'),
    ).toContain('already exists');
  });
  test('withSchemaChangeHold publishes a hold and takes the exclusive account lock', async () => {
    const seen = await withSchemaChangeHold(db.sql, account, async () => {
      const holds =
        await db.sql`select kind, estimated_end > now() as future from bulk_operations where account_id = ${account}`;
      const [shared] =
        await db.sql`select pg_try_advisory_xact_lock_shared(hashtextextended(${account}::uuid::text, 0)) as got`;
      return { holds, got: shared!.got };
    });
    expect([...seen.holds]).toEqual([{ kind: 'schema-change', future: true }]);
    expect(seen.got).toBe(false);
    await expect(withSchemaChangeHold(db.sql, account, async () => Promise.reject(new Error('boom')))).rejects.toThrow(
      'boom',
    );
    expect(await db.sql`select 1 from bulk_operations where account_id = ${account}`).toHaveLength(0);
  });
});

describe('suppression-list', () => {
  test.each([
    ['plain text', 'plain text'],
    ['plain-text', 'plain text'],
    ['plaintext', 'plain text'],
    ['md5', 'md5'],
    ['SHA512', 'sha512'],
  ])('format %j', async (given, stored) => {
    const { id } = await ok(
      'suppression-list',
      'create',
      '--account',
      account,
      '--name',
      `L ${given}`,
      '--format',
      given,
      '--global',
      '--offer',
      'offer-7',
    );
    const [l] = await db.sql`
      select format, is_global, offer_id from suppression_lists where account_id = ${account} and id = ${id}`;
    expect(l).toEqual({ format: stored, is_global: true, offer_id: 'offer-7' });
  });
  test('unknown format is a usage error', () =>
    fails(2, 'suppression-list', 'create', '--account', account, '--name', 'L', '--format', 'sha1'));
});

describe('seed', () => {
  test('adds md5(lower(trim(email))), idempotently', async () => {
    const md5 = createHash('md5').update('seed@example.com').digest('hex');
    expect(await ok('seed', 'add', '--account', account, '--email', '  Seed@Example.COM ')).toEqual({ emailMd5: md5 });
    expect(await ok('seed', 'add', '--account', account, '--email', 'seed@example.com')).toEqual({ emailMd5: md5 });
    const rows = await db.sql`
      select email, replace(email_md5::text, '-', '') as md5 from seed_addresses where account_id = ${account}`;
    expect([...rows]).toEqual([{ email: 'Seed@Example.COM', md5 }]);
  });
  test.each([
    ['no-at.example'],
    ['two@@example.com'],
    ['a@nodot'],
    ['a b@example.com'],
    ['a@example..com'],
    [`${'a'.repeat(250)}@b.co`],
  ])('email #%# is refused', async (email) => {
    await fails(2, 'seed', 'add', '--account', account, '--email', email);
  });
});

describe('demo', () => {
  test('creates everything once, then reuses it with a fresh key', async () => {
    const first = await ok('demo');
    const second = await ok('demo');
    expect(second.accountId).toBe(first.accountId);
    expect(second.brands).toEqual(first.brands);
    expect(second.suppressionLists).toEqual(first.suppressionLists);
    expect(second.keyId).not.toBe(first.keyId);
    expect(parseKey(second.key)!.id).toBe(second.keyId);
    const id = first.accountId;
    const types = await db.sql`select name, type from schema_attributes where account_id = ${id} order by position`;
    expect(types.map((t) => t.name)).toEqual(first.attributes);
    expect(new Set(types.map((t) => t.type))).toEqual(new Set(['string', 'email', 'number', 'boolean', 'array']));
    expect(new Set(first.suppressionLists.map((l: any) => l.format))).toEqual(new Set(['plain text', 'md5', 'sha512']));
    const [global] =
      await db.sql`select count(*)::int as n from suppression_lists where account_id = ${id} and is_global`;
    expect(global!.n).toBe(1);
    const brands = await db.sql`select enabled, esps from brands where account_id = ${id}`;
    expect(brands.some((b) => !b.enabled) && brands.some((b) => b.esps.length > 0)).toBe(true);
    const [key] = await db.sql`select scopes from api_keys where id = ${second.keyId}`;
    expect(key!.scopes).toEqual([...ALL_SCOPES]);
  });
});

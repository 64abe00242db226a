import type postgres from 'postgres';
import type { KeyClaim, KeyRow } from '../auth/authenticate';
import { LiveCache } from '../auth/cache';
import type { AnySql, Sql } from '../db';
import { ApiError } from '../errors';
import { versionedAttributes } from '../schema/service';
import { AttributeSchema } from './attributes';
import { readCreateRequest } from './create-request';
import { md5ToUuid } from './email';
import type { ContactBody, CreateContactInput } from './model';
import { toContact, type ContactRow } from './store';
import { bulkOperationJoin, contactWriteLock, contactWriteLockInInsert } from './write-guard';
import {
  brandSubscribeEvents,
  contactColumns,
  insertContact,
  liveBrandsAmong,
  patchedAttributes,
  seedAddressOf,
} from './write-sql';

/**
 * GET, POST (a new email) and PATCH of one contact as ONE statement each, for the common case (a
 * POST that publishes brand-subscribe events adds the events' insert, in one transaction).
 *
 * The plain paths in service.ts cost 3 (GET) and about 8 (POST, PATCH) round trips: key lookup,
 * schema, existence check, begin, bulk-operation check, lock, check, write, commit. Here the key and
 * the schema come from in-process caches (src/auth/cache.ts) together with the account's
 * cache_versions they were read at, and the statement re-reads those two counters (one index
 * probe): unchanged counters mean, in the statement's own snapshot, an unchanged key and schema.
 * The write guard runs inside the statement: a recorded bulk operation refuses the write at once,
 * otherwise contact_write_lock (sql/migrations/0010_write_guard_one_frame.sql) takes the shared lock
 * and checks again with a fresh snapshot.
 *
 * No rule of a write is spelled here: the request's (create-request.ts, AttributeSchema.read), the
 * write's SQL (write-sql.ts) and the guard's (write-guard.ts) are the plain path's own, composed
 * into one statement behind `allowed` (the patch) or `admitted` (the create) below.
 *
 * Each function either completes the request exactly as the plain path would, or changes nothing
 * and returns undefined; the caller then confirms the key and runs the plain path, which decides
 * every refusal (401, 403, 400, 404, 409) and every merge. So no answer other than success ever
 * rests on a cached value, and the order of checks of DESIGN.md is the plain path's.
 *
 * The statements are joins with their columns spelled out (fragments, not sql(list) helpers): every
 * subquery and CTE costs executor set-up even when it does nothing (a GET written with scalar
 * subqueries cost about 100 µs of database CPU, as joins about 60 µs, the baseline's bare select
 * 40 µs), and postgres.js builds sql(list) helpers with keyword regexes over the whole statement on
 * every call.
 */

type Fragment = postgres.Fragment;

interface CachedSchema {
  readonly version: number;
  readonly schema: AttributeSchema;
}

interface Versions {
  keys_version: number;
  schema_version: number;
}

export class ContactFastPath {
  /** Account id → its custom attributes at a schema version. */
  readonly schemas = new LiveCache<CachedSchema>();

  constructor(
    private readonly sql: Sql,
    private readonly keys: LiveCache<KeyRow>,
  ) {}

  async get(claim: KeyClaim, md5: string): Promise<ContactBody | undefined> {
    const { sql } = this;
    const accountId = claim.auth.accountId;
    const [row] = await sql<(Versions & ContactRow)[]>`
      select coalesce(v.keys, 0) as keys_version, coalesce(v.schema, 0) as schema_version, ${contactColumns(sql)}
      from (select) as one
      left join cache_versions v on v.account_id = ${accountId}
      left join contacts c on c.account_id = ${accountId} and c.email_md5 = ${md5ToUuid(md5)}`;
    if (!row || !this.keyCurrent(claim, row) || row.email_md5 === null) return undefined;
    let cached = this.schemas.get(accountId);
    // The schema changed since it was cached (or never was): read it now. The plain path reads the
    // contact and the schema in two statements as well.
    if (cached?.version !== row.schema_version) cached = await this.loadSchema(accountId);
    return toContact(row, cached.schema);
  }

  /** POST /v1/contacts for an email with no contact and no seed, or undefined. */
  async create(claim: KeyClaim, body: CreateContactInput): Promise<ContactBody | undefined> {
    const { sql } = this;
    const accountId = claim.auth.accountId;
    const request = readOrUndefined(() => readCreateRequest(body));
    if (!request) return undefined;
    const { version, schema } = await this.schemaOf(accountId);
    const attributes = readOrUndefined(() => schema.read(body.attributes ?? {}, 'create').set);
    if (!attributes) return undefined;
    const { email, key } = request;
    const brandIds = request.brandIds ?? [];
    const events = request.publish ? brandIds : [];
    const contact = { email, key, attributes, brandIds };
    // ONE INSERT … SELECT, which Citus sends whole to the account's node (see `admitted`). The lock
    // is taken only when every other check passed. Of parallel creates exactly one inserts here
    // (insertContact); the others take the plain path, which merges or answers 409.
    const insert = (q: AnySql) => {
      const brandsLive = brandIds.length
        ? q`and (select count(*) from brands where ${liveBrandsAmong(q, accountId, brandIds)}) = ${brandIds.length}`
        : q``;
      return insertContact(
        q,
        q`v.account_id`,
        contact,
        admitted(q, claim, version, {
          joins: q`left join seed_addresses on ${seedAddressOf(q, accountId, key)}`,
          checks: q`and seed_addresses.email_md5 is null ${brandsLive}`,
        }),
      );
    };
    const row = events.length
      ? // The brands' subscribe events in the insert's transaction, written only when it inserted, so
        // an event exists exactly when its assignment committed. On Citus both statements go to the
        // account's node, one local commit (in one statement, a CTE, Citus ran the insert through the
        // coordinator and committed over every worker).
        ((await sql.begin(async (tx) => {
          const [inserted] = await insert(tx);
          if (inserted) await brandSubscribeEvents(tx, accountId, key, events);
          return inserted;
        })) as ContactRow | undefined)
      : (await insert(sql))[0];
    return row ? toContact(row, schema) : this.refused(claim, version);
  }

  /**
   * After a create or patch that wrote nothing: the account's counters (a changed key or schema
   * leaves the caches), then the plain path. An account without a cache_versions row (no key or
   * schema change recorded yet; at 0 for both) gets one at 0, which changes no counter, so that its
   * next write can take `admitted` or `allowed`, which need the row.
   */
  private async refused(claim: KeyClaim, version: number): Promise<undefined> {
    const { sql } = this;
    const accountId = claim.auth.accountId;
    const [row] = await sql<(Versions & { present: boolean })[]>`
      select coalesce(v.keys, 0) as keys_version, coalesce(v.schema, 0) as schema_version,
             v.account_id is not null as present
      from (select) as one
      left join cache_versions v on v.account_id = ${accountId}`;
    if (row && !row.present)
      await sql`insert into cache_versions (account_id) values (${accountId}) on conflict (account_id) do nothing`;
    if (row && this.keyCurrent(claim, row) && row.schema_version !== version) this.schemas.delete(accountId);
    return undefined;
  }

  /** PATCH /v1/contacts/{emailMd5} of an existing contact, or undefined. */
  async patch(claim: KeyClaim, md5: string, input: Record<string, unknown>): Promise<ContactBody | undefined> {
    const { sql } = this;
    const accountId = claim.auth.accountId;
    const { version, schema } = await this.schemaOf(accountId);
    const changes = readOrUndefined(() => schema.read(input, 'patch'));
    if (!changes) return undefined;
    // The counters are read back only when it updates nothing (`refused`): reading them for every
    // answer, joined around the update, cost the server a tenth more per patch (bench/README.md,
    // session 20). The update is a CTE under a SELECT, which Citus sends whole to the account's
    // node; as the statement itself, after `allowed`, Citus ran `allowed` as a subplan first.
    // `allowed` has one column, `ok`, so the SET and RETURNING read the contact's.
    const [row] = await sql<ContactRow[]>`
      with ${allowed(sql, claim, version)},
      updated as (
        update contacts
        set attributes = ${patchedAttributes(sql, changes)}, updated_at = now()
        from allowed
        where contacts.account_id = ${accountId} and contacts.email_md5 = ${md5ToUuid(md5)}
        returning ${contactColumns(sql)}
      )
      select * from updated`;
    return row ? toContact(row, schema) : this.refused(claim, version);
  }

  /** False when the account's keys changed since the claim was read; the cached key goes. */
  private keyCurrent(claim: KeyClaim, row: Versions): boolean {
    if (row.keys_version === claim.keysVersion) return true;
    this.keys.delete(claim.auth.keyId);
    return false;
  }

  private async schemaOf(accountId: string): Promise<CachedSchema> {
    return this.schemas.get(accountId) ?? this.loadSchema(accountId);
  }

  private async loadSchema(accountId: string): Promise<CachedSchema> {
    const epoch = this.schemas.epoch;
    const { version, attributes } = await versionedAttributes(this.sql, accountId);
    const cached = { version, schema: new AttributeSchema(attributes) };
    this.schemas.set(accountId, cached, epoch);
    return cached;
  }
}

/**
 * The `allowed` CTE of a patch: a row when the cached key and schema are current (the account's
 * counters unchanged) and no bulk operation is recorded, and then the write lock is taken and its
 * second check passed. The lock is a lateral row that exists only when the checks pass, so it comes
 * after them (PostgreSQL does not merge a subquery that calls a volatile function into the query
 * around it). A CTE because Citus refuses a volatile function in an UPDATE, and a stable one called
 * with a column (contact_write_ok, as `admitted` has it).
 */
function allowed(sql: Sql, claim: KeyClaim, version: number) {
  const accountId = claim.auth.accountId;
  return sql`allowed as (
    select w.ok from cache_versions v
    ${bulkOperationJoin(sql, accountId)}
    join lateral (
      select ${contactWriteLock(sql, accountId)} as ok
      where v.keys = ${claim.keysVersion} and v.schema = ${version} and b.account_id is null
    ) w on w.ok
    where v.account_id = ${accountId}
  )`;
}

/**
 * The FROM and WHERE of the create's one INSERT … SELECT (without brand events): the account's
 * cache_versions row when the checks of `allowed` and `checks` (over `joins`) pass, and then the
 * same lock. No row when it refuses, so the counters are read after (refused). Its account is the row's column, and
 * the lock is contactWriteLockInInsert over it: a statement Citus pushes down to the account's node
 * whole, in one round trip and one local commit. The CASE keeps the lock after the checks.
 */
function admitted(sql: AnySql, claim: KeyClaim, version: number, extra: { joins: Fragment; checks: Fragment }) {
  const accountId = claim.auth.accountId;
  const passes = sql`v.keys = ${claim.keysVersion} and v.schema = ${version} and b.account_id is null ${extra.checks}`;
  return sql`
    from cache_versions v
    ${bulkOperationJoin(sql, accountId)}
    ${extra.joins}
    where v.account_id = ${accountId} and ${passes}
      and case when ${passes} then ${contactWriteLockInInsert(sql, sql`v.account_id`)} else false end`;
}

/** What a reading of the request returns, or undefined when it refuses (the plain path then says why). */
function readOrUndefined<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch (error) {
    if (error instanceof ApiError) return undefined;
    throw error;
  }
}

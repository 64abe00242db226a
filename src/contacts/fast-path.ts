import type { KeyClaim, KeyRow } from '../auth/authenticate';
import { LiveCache } from '../auth/cache';
import { AccountNodes, type AnySql, type Sql } from '../db';
import { ApiError } from '../errors';
import { versionedAttributes } from '../schema/service';
import { AttributeSchema } from './attributes';
import { readCreateRequest } from './create-request';
import { md5ToUuid } from './email';
import type { ContactBody, CreateContactInput } from './model';
import { toContact, type ContactRow } from './store';
import { brandSubscribeEvents, contactColumns, insertContact, liveBrandsAmong, patchedAttributes } from './write-sql';

/**
 * GET, POST (a new email) and PATCH of one contact as ONE statement each, for the common case (a
 * POST with brands checks them first and may publish their subscribe events, in one transaction).
 *
 * The plain paths in service.ts cost 3 (GET) and about 8 (POST, PATCH) round trips: key lookup,
 * schema, existence check, begin, bulk-operation check, lock, check, write, commit. Here the key and
 * the schema come from in-process caches (src/auth/cache.ts) together with the account's
 * cache_versions they were read at, and the statement re-reads those two counters (one index
 * probe): unchanged counters mean, in the statement's own snapshot, an unchanged key and schema.
 *
 * Each statement is on contacts alone, with its checks in database functions
 * (sql/migrations/0018_static_write_checks.sql) called with the row's email_md5, so that they run
 * with the row: contact_versions, the counters a GET returns, and contact_write_admitted and
 * contact_create_admitted, a write's checks (counters, bulk operation, seed address) and then its
 * write lock (the guard of write-guard.ts). On a Citus cluster such a statement, sent to the node of
 * the account's shards (src/db/account-nodes.ts), takes Citus's fast path and runs there alone; a join
 * of the same tables went through its router planner at five times the cost.
 *
 * No rule of a write is spelled here: the request's (create-request.ts, AttributeSchema.read), the
 * write's SQL (write-sql.ts) and the guard's (write-guard.ts, contact_write_admitted) are the plain
 * path's own.
 *
 * Each function either completes the request exactly as the plain path would, or changes nothing
 * and returns undefined; the caller then confirms the key and runs the plain path, which decides
 * every refusal (401, 403, 400, 404, 409) and every merge. So no answer other than success ever
 * rests on a cached value, and the order of checks of DESIGN.md is the plain path's.
 */

interface CachedSchema {
  readonly version: number;
  readonly schema: AttributeSchema;
}

/** contact_versions(account): the account's counters of cache_versions, [keys, schema]. */
interface CounterRow {
  versions: [keys: number | string, schema: number | string];
}

const keysVersion = (row: CounterRow) => Number(row.versions[0]);
const schemaVersion = (row: CounterRow) => Number(row.versions[1]);

export class ContactFastPath {
  /** Account id → its custom attributes at a schema version. */
  readonly schemas = new LiveCache<CachedSchema>();

  constructor(
    private readonly sql: Sql,
    private readonly keys: LiveCache<KeyRow>,
    private readonly nodes: AccountNodes = new AccountNodes(sql),
  ) {}

  async get(claim: KeyClaim, md5: string): Promise<ContactBody | undefined> {
    const accountId = claim.auth.accountId;
    const db = this.nodes.for(accountId);
    const [row] = await db<(CounterRow & ContactRow)[]>`
      select contact_versions(account_id) as versions, ${contactColumns(db)}
      from contacts where account_id = ${accountId} and email_md5 = ${md5ToUuid(md5)}`;
    if (!row || !this.keyCurrent(claim, row)) return undefined;
    let cached = this.schemas.get(accountId);
    // The schema changed since it was cached (or never was): read it now. The plain path reads the
    // contact and the schema in two statements as well.
    if (cached?.version !== schemaVersion(row)) cached = await this.loadSchema(accountId);
    return toContact(row, cached.schema);
  }

  /** POST /v1/contacts for an email with no contact and no seed, or undefined. */
  async create(claim: KeyClaim, body: CreateContactInput): Promise<ContactBody | undefined> {
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
    const db = this.nodes.for(accountId);
    // The lock is taken only when every other check passed. Of parallel creates exactly one inserts
    // here (insertContact); the others take the plain path, which merges or answers 409.
    const insert = (q: AnySql) =>
      insertContact(q, accountId, contact, q`contact_create_admitted(email_md5, ${admittedArgs(q, claim, version)})`);
    let row: ContactRow | undefined;
    try {
      row = brandIds.length
        ? // The brands' check, then the insert and its subscribe events, written only when it
          // inserted, so an event exists exactly when its assignment committed: one transaction on
          // the account's node.
          ((await db.begin(async (tx) => {
            const [live] = await tx<{ n: number }[]>`
              select count(*)::int as n from brands where ${liveBrandsAmong(tx, accountId, brandIds)}`;
            if (live!.n !== brandIds.length) return undefined;
            const [inserted] = await insert(tx);
            if (inserted && events.length) await brandSubscribeEvents(tx, accountId, key, events);
            return inserted;
          })) as ContactRow | undefined)
        : (await insert(db))[0];
    } catch (error) {
      if (!refusedInsert(error)) throw error;
    }
    return row ? toContact(row, schema) : this.refused(claim, version);
  }

  /**
   * After a create or patch that wrote nothing: the account's counters (a changed key or schema
   * leaves the caches), and the account's route is looked up again (its shards may have moved);
   * then the plain path.
   */
  private async refused(claim: KeyClaim, version: number): Promise<undefined> {
    const accountId = claim.auth.accountId;
    this.nodes.forget(accountId);
    // The table itself, not contact_versions: on a cluster whose coordinator holds no copy of the
    // reference tables that function can only run on a worker, and this runs on the API's own node.
    const [row] = await this.sql<CounterRow[]>`
      select array[coalesce(max(keys), 0), coalesce(max(schema), 0)] as versions
      from cache_versions where account_id = ${accountId}`;
    if (row && this.keyCurrent(claim, row) && schemaVersion(row) !== version) this.schemas.delete(accountId);
    return undefined;
  }

  /** PATCH /v1/contacts/{emailMd5} of an existing contact, or undefined. */
  async patch(claim: KeyClaim, md5: string, input: Record<string, unknown>): Promise<ContactBody | undefined> {
    const accountId = claim.auth.accountId;
    const { version, schema } = await this.schemaOf(accountId);
    const changes = readOrUndefined(() => schema.read(input, 'patch'));
    if (!changes) return undefined;
    const db = this.nodes.for(accountId);
    // The counters are read back only when it updates nothing (`refused`): reading them for every
    // answer cost the server a tenth more per patch (bench/findings/2026-11-27-patch-without-counters-read-back.md).
    const [row] = await db<ContactRow[]>`
      update contacts
      set attributes = ${patchedAttributes(db, changes)}, updated_at = now()
      where account_id = ${accountId} and email_md5 = ${md5ToUuid(md5)}
        and contact_write_admitted(email_md5, ${admittedArgs(db, claim, version)}, false)
      returning ${contactColumns(db)}`;
    return row ? toContact(row, schema) : this.refused(claim, version);
  }

  /** False when the account's keys changed since the claim was read; the cached key goes. */
  private keyCurrent(claim: KeyClaim, row: CounterRow): boolean {
    if (keysVersion(row) === claim.keysVersion) return true;
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
 * The account and the counters the API cached, the arguments after the row's email_md5 of a write's
 * checks (sql/migrations/0018): contact_write_admitted in a PATCH's WHERE, false when it refuses,
 * and contact_create_admitted in a create's RETURNING, which raises. Each returns true when the key
 * and schema counters are current, no bulk operation is recorded, a new contact's email is no seed
 * address, and then holds the account's write lock and has passed its second check. The row's
 * column as argument makes the call run with the row, once, on the node that holds it.
 */
function admittedArgs(sql: AnySql, claim: KeyClaim, version: number) {
  return sql`${claim.auth.accountId}::uuid, ${claim.keysVersion}::int8, ${version}::int8`;
}

/**
 * The create refused by contact_create_admitted: the code it raises, which nothing else does. On
 * Citus the error comes from the shard's node, relayed with its code.
 */
function refusedInsert(error: unknown): boolean {
  return (error as { code?: string })?.code === 'CW001';
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

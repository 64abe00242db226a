-- The tables of the contact, brand and suppression service (0002 adds the caches' invalidation,
-- 0003 the single contact write's lock). Nothing has been released, so this is the schema as it
-- stands, not its history: a change from now on is a new numbered file.
--
-- Every primary key leads with account_id so the tables can be distributed by account
-- (Citus create_distributed_table on account_id) without a rewrite.
--
-- Some foreign keys to accounts are left out on purpose: contacts, brand_subscribe_events and
-- suppression_records are written in bulk, where the per-row check cost more than the write
-- (about 45% of a contact import's merge: one probe of accounts_pkey with a FOR KEY SHARE lock per
-- contact and per event; about 5 µs a row, 50 s of a 10-million-record suppression import). They
-- guarded nothing the writers do not already guarantee: every writer acts for an account it has
-- authenticated (API key) or loaded (the import row) before it writes, records are written only
-- while their list is held after finding it in the account, and accounts and lists are never
-- deleted (suspension is a flag). The tables written a row at a time keep their keys.

create table accounts (
  id           uuid primary key default gen_random_uuid(),
  name         text not null,
  suspended_at timestamptz,
  created_at   timestamptz not null default now()
);

-- Keys look like ck_<id hex>_<secret>; only sha256(secret) is stored.
create table api_keys (
  account_id    uuid not null references accounts (id),
  id            uuid not null default gen_random_uuid(),
  secret_sha256 bytea not null,
  scopes        text[] not null,
  created_at    timestamptz not null default now(),
  revoked_at    timestamptz,
  primary key (account_id, id)
);
-- Authentication finds a key by its id alone (the account is not known yet).
create unique index api_keys_id on api_keys (id);

-- Custom attributes; Email and Brand are predefined and never stored here.
create table schema_attributes (
  account_id  uuid not null references accounts (id),
  name        text not null,
  type        text not null check (type in ('string', 'email', 'number', 'boolean', 'array')),
  description text,
  position    bigint generated always as identity,  -- creation order = schema order
  created_at  timestamptz not null default now(),
  primary key (account_id, name)
);
create unique index schema_attributes_name_ci on schema_attributes (account_id, lower(name));

create table brands (
  account_id                  uuid not null references accounts (id),
  id                          uuid not null default gen_random_uuid(),
  name                        text not null,
  enabled                     boolean not null default true,
  from_address                text,
  domain                      text,
  esps                        jsonb not null default '[]',  -- [{id, name}]
  verticals                   jsonb not null default '[]',  -- [{id, label}]
  unsubscribe_page_id         uuid,
  use_list_unsubscribe_header boolean not null default false,
  created_at                  timestamptz not null default now(),
  -- Deleted brands stay as rows so contacts that still carry the id can name it.
  deleted_at                  timestamptz,
  primary key (account_id, id)
);
-- CSV Brand cells match names case-insensitively, so live names must be unique that way.
create unique index brands_live_name_ci on brands (account_id, lower(name)) where deleted_at is null;
create index brands_account_name on brands (account_id, name, id) where deleted_at is null;

-- email_md5 is md5(lower(trim(email))) stored as uuid: 16 bytes, and md5(x)::uuid casts directly.
create table contacts (
  account_id          uuid not null,
  email_md5           uuid not null,
  email               text not null,
  attributes          jsonb not null default '{}',
  brand_ids           uuid[] not null default '{}',
  enabled             boolean not null default true,
  created_at          timestamptz not null default now(),  -- first-added date (hidden field too)
  updated_at          timestamptz not null default now(),
  -- Hidden fields: never changed by any request.
  hard_bounced        boolean not null default false,
  hard_bounced_at     timestamptz,
  first_source        text not null check (first_source in ('api', 'import')),
  first_import_id     uuid,
  first_import_method text check (first_import_method in ('api', 'manual')),
  primary key (account_id, email_md5)
)
-- Room on every heap page for updated versions of its rows. An update that finds room on its
-- row's own page is HOT: no new primary-key entry, no index page touched, and the old version is
-- pruned from the page later without a vacuum. With full pages (the default, 100) an import that
-- updates contacts (overwrite / keep, restoreDisabled) writes every new version to another page
-- and a new entry into contacts_pkey for each. Measured with `bun run bench -- --rows 1000000
-- --steps l1,a,b` (a contact is ~540 bytes, a page holds ~15): import B's merge took 15.2 s at 100,
-- 12.9 s at 70, 12.2 s at 60 (66% of its updates HOT), 11.9 s at 50 (93%); import A's (all
-- inserts) 5.2-5.7 s at every setting. 60 takes most of the gain for 1.6x the pages.
with (fillfactor = 60);

create table seed_addresses (
  account_id uuid not null references accounts (id),
  email_md5  uuid not null,
  email      text not null,
  created_at timestamptz not null default now(),
  primary key (account_id, email_md5)
);

-- Outbox of brand-subscribe events, written in the same transaction as the assignment. A row is
-- one brand newly assigned to a SET of contacts by one write (an API write: one contact; an import
-- merge batch: every contact of the batch that got the brand). One row per (contact, brand) cost a
-- 1M-row import 1.18M outbox rows and about 4 s of PostgreSQL CPU, some 40% of the merge of a
-- fresh account; as sets it is one row per brand per batch. A consumer reads one event per contact
-- with unnest:
--   select e.id, e.account_id, e.brand_id, m.email_md5, e.source, e.import_id, e.created_at
--   from brand_subscribe_events e cross join lateral unnest(e.email_md5s) as m(email_md5)
create table brand_subscribe_events (
  account_id uuid not null,
  id         bigint generated always as identity,
  email_md5s uuid[] not null check (cardinality(email_md5s) >= 1),
  brand_id   uuid not null,
  source     text not null check (source in ('api', 'import')),
  import_id  uuid,
  created_at timestamptz not null default now(),
  primary key (account_id, id)
);

-- A running bulk contact operation (import merge phase) or schema change of an account: while a
-- row exists, single contact writes of the account are refused (the protocol, with its advisory
-- lock, is src/contacts/write-guard.ts).
create table bulk_operations (
  account_id   uuid not null references accounts (id),
  id           uuid not null,  -- the import id, or a fresh id for a schema change
  kind         text not null check (kind in ('contact-import', 'schema-change')),
  started_at   timestamptz not null default now(),
  estimated_end timestamptz not null,
  primary key (account_id, id)
);

create table contact_imports (
  account_id                 uuid not null references accounts (id),
  id                         uuid not null default gen_random_uuid(),
  status                     text not null check (status in ('awaiting-upload', 'uploaded', 'importing', 'failed', 'success')),
  method                     text not null check (method in ('api', 'manual')),
  columns                    text[] not null,  -- canonical schema names, in file order
  duplicate_contact_strategy text not null check (duplicate_contact_strategy in ('overwrite', 'keep', 'skip')),
  overwrite_brands           boolean not null default false,
  restore_disabled           boolean not null default false,
  publish_events             boolean not null default true,
  brand_ids                  uuid[] not null default '{}',
  row_count                  bigint,
  added_count                bigint not null default 0,
  updated_count              bigint,
  skipped_count              bigint,
  malformed_count            bigint not null default 0,
  duplicate_in_file_count    bigint,
  percent_complete           int,
  failure_reason             text,
  -- Rows the read phase staged, committed with the move to dedupe. The raw staging table is
  -- UNLOGGED, so a PostgreSQL crash empties it; dedupe compares it with this figure and sends the
  -- import back to the read phase instead of merging a wiped table as if the file were empty.
  staged_count               bigint,
  -- pipeline bookkeeping
  object_key                 text,
  object_etag                text,
  object_size                bigint,
  upload_expires_at          timestamptz,
  uploaded_at                timestamptz,
  started_at                 timestamptz,
  phase                      text check (phase in ('read', 'dedupe', 'merge', 'finish')),
  checkpoint                 bigint not null default 0,  -- last merged staged row position
  attempts                   int not null default 0,
  created_at                 timestamptz not null default now(),
  completed_at               timestamptz,
  updated_at                 timestamptz not null default now(),
  primary key (account_id, id)
);
-- One open import per account, enforced by PostgreSQL whatever channel created it.
create unique index contact_imports_one_open on contact_imports (account_id)
  where status in ('awaiting-upload', 'uploaded', 'importing');
create index contact_imports_newest on contact_imports (account_id, created_at desc, id desc);
create index contact_imports_open on contact_imports (status, created_at)
  where status in ('awaiting-upload', 'uploaded', 'importing');

create table suppression_lists (
  account_id   uuid not null references accounts (id),
  id           uuid not null default gen_random_uuid(),
  name         text not null,
  format       text not null check (format in ('plain text', 'md5', 'sha512')),
  is_global    boolean not null default false,
  offer_id     text,  -- lists attached to an offer are hidden from the API listing
  record_count bigint not null default 0,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  primary key (account_id, id)
);

-- value: 16 bytes for md5, 64 for sha512, the UTF-8 bytes of the normalised address for plain text.
-- The primary key makes a membership check one index probe.
create table suppression_records (
  account_id uuid not null,
  list_id    uuid not null,
  value      bytea not null,
  primary key (account_id, list_id, value)
);

create table suppression_imports (
  account_id      uuid not null,
  id              uuid not null default gen_random_uuid(),
  list_id         uuid not null,
  status          text not null check (status in ('importing', 'completed', 'failed')),
  method          text not null check (method in ('api', 'manual')),
  total_count     bigint not null default 0,
  added_count     bigint not null default 0,
  duplicate_count bigint not null default 0,
  malformed_count bigint not null default 0,
  failure_reason  text,
  created_at      timestamptz not null default now(),
  completed_at    timestamptz,
  -- When a running import expects to finish: the Retry-After a second import on the busy list
  -- gets (at least 1 second). Manual imports estimate it from the file size and refine it.
  estimated_end   timestamptz,
  primary key (account_id, id),
  foreign key (account_id, list_id) references suppression_lists (account_id, id)
);
-- One import at a time per list.
create unique index suppression_imports_one_running on suppression_imports (account_id, list_id)
  where status = 'importing';
create index suppression_imports_newest on suppression_imports (account_id, list_id, created_at desc, id desc);

-- The whole schema of the contact, brand and suppression service.
-- Every primary key leads with account_id so the tables can be distributed by account
-- (Citus create_distributed_table on account_id) without a rewrite.

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
  account_id          uuid not null references accounts (id),
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
);

create table seed_addresses (
  account_id uuid not null references accounts (id),
  email_md5  uuid not null,
  email      text not null,
  created_at timestamptz not null default now(),
  primary key (account_id, email_md5)
);

-- Outbox of brand-subscribe events, written in the same transaction as the assignment.
create table brand_subscribe_events (
  account_id uuid not null references accounts (id),
  id         bigint generated always as identity,
  email_md5  uuid not null,
  brand_id   uuid not null,
  source     text not null check (source in ('api', 'import')),
  import_id  uuid,
  created_at timestamptz not null default now(),
  primary key (account_id, id)
);

-- A running bulk contact operation (import merge phase) or schema change of an account.
-- Single contact writes check for a row here under a shared advisory lock; the bulk side holds
-- the exclusive lock per batch, so no single write interleaves with a bulk write.
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
  primary key (account_id, list_id, value),
  foreign key (account_id, list_id) references suppression_lists (account_id, id)
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
  primary key (account_id, id),
  foreign key (account_id, list_id) references suppression_lists (account_id, id)
);
-- One import at a time per list.
create unique index suppression_imports_one_running on suppression_imports (account_id, list_id)
  where status = 'importing';
create index suppression_imports_newest on suppression_imports (account_id, list_id, created_at desc, id desc);

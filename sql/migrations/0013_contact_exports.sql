-- Bulk contact exports (POST /v1/contact-exports; src/exports, worker/exports). docs/exports-and-erasure.md "Contact exports".
-- No job queue: the row is the job. A worker claims a queued export, or one whose lease lapsed (its
-- worker died), by a conditional update, renews the lease while it streams the file, and a taker of a
-- lapsed lease starts the file again from scratch (the first run's half-written object is dropped).
-- On Citus: one connection per node for the whole migration (as 0011), since it distributes a table
-- and then replaces a function, which Citus refuses after parallel work in the same transaction.
set local citus.multi_shard_modify_mode to 'sequential';
create table contact_exports (
  account_id      uuid not null,
  id              uuid not null default gen_random_uuid(),
  status          text not null check (status in ('queued', 'exporting', 'success', 'failed')),
  -- Canonical schema names, in file order.
  columns         text[] not null,
  -- The filter as asked: null = not given.
  brand_ids       uuid[],
  enabled         boolean,
  compression     text not null check (compression in ('none', 'gzip')),
  -- Rows the account had to export as counted beside the run (percentComplete), and the rows written.
  rows_expected   bigint,
  rows_written    bigint not null default 0,
  row_count       bigint,
  failure_reason  text,
  -- Runs started: each writes its own object, so a run that lost its lease can never replace the file.
  attempts        integer not null default 0,
  -- The object of the current run (while exporting) or the file (on success); null once removed.
  object_key      text,
  -- The S3 multipart upload of the current run, aborted by a run that takes the export over.
  upload_id       text,
  file_expires_at timestamptz,
  lease_token     uuid,
  lease_until     timestamptz,
  created_at      timestamptz not null default now(),
  started_at      timestamptz,
  completed_at    timestamptz,
  primary key (account_id, id)
);
-- One open export per account (the API's 409): the database enforces it, not a check-then-insert race.
create unique index contact_exports_one_open on contact_exports (account_id) where status in ('queued', 'exporting');
-- The retention sweep's range.
create index contact_exports_kept on contact_exports (file_expires_at) where object_key is not null and status = 'success';

select distribute_by_account('contact_exports');

-- A database that gets Citus later (`citus distribute`): 0012's distribute_tables, then this one.
alter function distribute_tables() rename to distribute_tables_0012;
create function distribute_tables() returns void language plpgsql as $$
begin
  perform distribute_tables_0012();
  perform distribute_by_account('contact_exports');
  perform truncate_local_data_after_distributing_table(logicalrelid)
  from pg_dist_partition where logicalrelid::text = 'contact_exports';
end $$;

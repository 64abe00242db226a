-- The staging pool of a Citus cluster (worker/import/staging-pool.ts): sets of staging tables made
-- ahead of the imports that use them, one import at a time, and emptied after. On a cluster each
-- staging table is a distributed table of 32 shards, about a second to make and half a second to
-- drop; an import made and dropped eight of its own, which kept a 4-row import 14 s from its PUT to
-- `success`. Plain PostgreSQL makes each import's own tables, in milliseconds, and leaves this
-- table empty.
--
-- A reference table on a cluster (a copy on every node): a set serves any account, and is claimed
-- from whichever node the worker is connected to.
set local citus.multi_shard_modify_mode to 'sequential';
create table staging_sets (
  id          uuid primary key,
  -- The set's tables as the code that made them lays them out: a set of another layout is dropped
  -- once free, never claimed.
  layout      integer not null,
  -- Whether every table of the set is made (a set is recorded before its tables, so that none is
  -- ever left unrecorded).
  ready       boolean not null default false,
  -- The import using the set and its account, or null: free.
  import_id   uuid unique,
  account_id  uuid,
  claimed_at  timestamptz,
  created_at  timestamptz not null default now(),
  check ((import_id is null) = (account_id is null))
);

do $$
begin
  if is_distributed('contacts') then
    perform create_reference_table('staging_sets');
  end if;
end $$;

alter function distribute_tables() rename to distribute_tables_0013;
create function distribute_tables() returns void language plpgsql as $$
begin
  perform distribute_tables_0013();
  if not exists (select 1 from pg_dist_partition where logicalrelid = 'staging_sets'::regclass and partmethod = 'n'
                 and repmodel = 't') then
    -- Empty: one PostgreSQL never uses the pool.
    perform create_reference_table('staging_sets');
  end if;
end $$;

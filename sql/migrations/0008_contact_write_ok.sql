-- The contact-write lock for ONE `INSERT … SELECT` (the fast path's create, src/contacts/fast-path.ts)
-- that Citus sends whole to the node of the account's shards.
--
-- Citus pushes an INSERT … SELECT down only when it calls no volatile function. With
-- contact_write_lock (volatile) in it, it ran the SELECT as a subplan, pulled the row to the
-- coordinator, copied it to every worker and inserted it from there in a two-phase commit over all of
-- them: 5 ms of coordinator CPU per create and a p99 of 2 s under 64 connections
-- (bench/findings/2026-11-26-citus-single-node-beside-cluster.md), and a cost that grew with the number of workers.
--
-- contact_write_ok is that lock declared STABLE, which it is not: it takes an advisory lock. The lie
-- is narrow and safe here:
-- - contact_write_lock inside it stays VOLATILE, so its check of bulk_operations after the lock still
--   runs with a fresh snapshot (a stable function's own statements would reuse the caller's);
-- - the caller passes the account as a column of the statement's distributed table (cache_versions'
--   account_id): Citus evaluates a non-immutable call whose arguments are all constants on the
--   coordinator before it pushes the statement down, which would take the lock on the wrong node;
-- - the caller evaluates it once, for the one row its other checks let through (a CASE over them),
--   so the lock is taken exactly when it would have been.
create function contact_write_ok(account uuid) returns boolean language plpgsql stable as $$
begin
  return contact_write_lock(account);
end $$;

-- distribute_tables of 0007, with contact_write_ok made present on every node: on a database that
-- got Citus after this migration, nothing else puts it on the workers, where the pushed-down create
-- calls it. (Created after the extension, Citus propagates it at once.)
create or replace function distribute_tables() returns void language plpgsql as $$
declare
  t text;
begin
  if not exists (select 1 from pg_extension where extname = 'citus') then
    raise exception 'distribute_tables: the citus extension is not installed in this database'
      using errcode = '55000';
  end if;
  -- One connection per node for the whole transaction: DDL of tables with foreign keys between
  -- them must not be spread over parallel connections.
  set local citus.multi_shard_modify_mode to 'sequential';
  -- A table with a foreign key to a reference table becomes a Citus local table (partmethod 'n',
  -- repmodel 's') when that one is made a reference table; create_reference_table and
  -- create_distributed_table then turn it into what it is meant to be.
  foreach t in array array['accounts', 'api_keys'] loop
    if not exists (select 1 from pg_dist_partition
                   where logicalrelid = t::regclass and partmethod = 'n' and repmodel = 't') then
      perform create_reference_table(t);
    end if;
  end loop;
  -- The one foreign key between two distributed tables: while one end is a Citus local table and the
  -- other distributed, neither may have it, so it is dropped for the conversion and made again after.
  alter table suppression_imports drop constraint if exists suppression_imports_list_fkey;
  alter table suppression_imports drop constraint if exists suppression_imports_account_id_list_id_fkey;
  -- contacts first: it names the colocation group.
  perform create_distributed_table('contacts', 'account_id')
    where not exists (select 1 from pg_dist_partition where logicalrelid = 'contacts'::regclass and partmethod = 'h');
  foreach t in array array[
    'seed_addresses', 'schema_attributes', 'brands', 'brand_subscribe_events', 'bulk_operations',
    'contact_imports', 'cache_versions', 'suppression_lists', 'suppression_records', 'suppression_imports'
  ] loop
    perform distribute_by_account(t::regclass);
  end loop;
  alter table suppression_imports add constraint suppression_imports_list_fkey
    foreign key (account_id, list_id) references suppression_lists (account_id, id);
  -- Distributing copies a table's rows into its shards and leaves them in the coordinator's own
  -- table too, unread: gone now (a no-op for the empty tables of a new database).
  perform truncate_local_data_after_distributing_table(logicalrelid)
  from pg_dist_partition
  where logicalrelid::text in ('accounts', 'api_keys', 'contacts', 'seed_addresses', 'schema_attributes', 'brands',
                               'brand_subscribe_events', 'bulk_operations', 'contact_imports', 'cache_versions',
                               'suppression_lists', 'suppression_records', 'suppression_imports');
  -- The single write's lock runs where the account's shards are: inside a one-statement write (the
  -- statement goes to that node whole) and when called alone (delegated there, in a transaction too).
  perform create_distributed_function('contact_write_lock(uuid)', 'account',
    colocate_with => 'contacts', force_delegation => true);
  perform create_distributed_function('account_bulk_lock(uuid,boolean)', 'account',
    colocate_with => 'contacts', force_delegation => true);
  -- Called inside the create that is pushed down to the account's node (above).
  perform create_distributed_function('contact_write_ok(uuid)');
end $$;

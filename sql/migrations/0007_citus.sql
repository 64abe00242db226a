-- Distribution on a Citus cluster (docs/scaling-out.md). On plain PostgreSQL this file only creates
-- the function; on a database with the citus extension it distributes the tables at once. The
-- admin command `citus distribute` calls the same function for a database that was migrated on one
-- PostgreSQL and got Citus later: tables with rows are distributed with their rows.
--
-- What goes where:
-- - reference tables (a copy on every node) for what is read without an account: accounts, and
--   api_keys (authentication finds a key by its id before it knows the account);
-- - every other account-scoped table hash-distributed by account_id and colocated with contacts,
--   so every statement of one account runs on the one node that holds the account's shards;
-- - schema_migrations stays on the coordinator.
--
-- A new account-scoped table in a later migration must be distributed in that migration the same
-- way, and so is each per-import staging table when the worker makes it (worker/import/staging.ts):
-- distribute_by_account below, which does nothing on plain PostgreSQL.
-- Citus cannot distribute a table with an identity column once a foreign key to a reference table
-- made it a Citus local table (as accounts' reference table does to schema_attributes): the
-- attributes' creation order comes from a sequence of its own instead, on both engines.
alter table schema_attributes alter column position drop identity;
create sequence schema_attributes_position_seq as bigint owned by schema_attributes.position;
select setval('schema_attributes_position_seq', coalesce((select max(position) from schema_attributes), 0) + 1, false);
alter table schema_attributes alter column position set default nextval('schema_attributes_position_seq');

-- Makes `t` hash-distributed by account_id and colocated with contacts, on a database whose contacts
-- are distributed; nothing on plain PostgreSQL (or before distribute_tables ran), nothing for a table
-- that already is. Every statement of one account then runs on the node of the account's shards.
create function distribute_by_account(t regclass) returns void language plpgsql as $$
declare
  cluster boolean;
  done boolean;
begin
  if to_regclass('pg_catalog.pg_dist_partition') is null then
    return;
  end if;
  -- Citus's catalog only in dynamic SQL: plain PostgreSQL has none to parse a static query against.
  execute $q$ select exists (select 1 from pg_catalog.pg_dist_partition
                             where logicalrelid = 'contacts'::regclass and partmethod = 'h'),
                     exists (select 1 from pg_catalog.pg_dist_partition
                             where logicalrelid = $1 and partmethod = 'h') $q$
    into cluster, done using t;
  if cluster and not done then
    perform create_distributed_table(t, 'account_id', colocate_with => 'contacts');
  end if;
end $$;

-- Whether `t` is a hash-distributed table of a Citus cluster (false on plain PostgreSQL).
create function is_distributed(t regclass) returns boolean language plpgsql stable as $$
declare
  distributed boolean;
begin
  if to_regclass('pg_catalog.pg_dist_partition') is null then
    return false;
  end if;
  execute $q$ select exists (select 1 from pg_catalog.pg_dist_partition
                             where logicalrelid = $1 and partmethod = 'h') $q$
    into distributed using t;
  return distributed;
end $$;

create function distribute_tables() returns void language plpgsql as $$
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
end $$;

-- The bulk side of the account's contact-write lock (src/contacts/write-guard.ts), for the caller's
-- transaction: exclusive to drain the single writes, shared for each merge batch. A function of its
-- own so that on Citus it runs where contact_write_lock does, on the node of the account's shards:
-- advisory locks are per node.
create function account_bulk_lock(account uuid, exclusive boolean) returns void language plpgsql volatile as $$
begin
  if exclusive then
    perform pg_advisory_xact_lock(hashtextextended(account::text, 0));
  else
    perform pg_advisory_xact_lock_shared(hashtextextended(account::text, 0));
  end if;
end $$;

-- On Citus the function runs on the node of the account's shards, inside a query on a shard, where
-- a query of the distributed table bulk_operations is refused: it reads the shard itself.
create or replace function contact_write_lock(account uuid) returns boolean language plpgsql volatile as $$
declare
  shard text;
  busy boolean;
begin
  perform pg_advisory_xact_lock_shared(hashtextextended(account::text, 0));
  -- Citus's catalogs only in dynamic SQL: plain PostgreSQL has none to parse a static query against.
  if to_regclass('pg_catalog.pg_dist_partition') is not null then
    execute $q$
      select shard_name('bulk_operations'::regclass, get_shard_id_for_distribution_column('bulk_operations', $1))
      from pg_catalog.pg_dist_partition where logicalrelid = 'bulk_operations'::regclass and partmethod = 'h'$q$
      into shard using account;
  end if;
  if shard is not null then
    execute format('select exists (select 1 from %s where account_id = $1)', shard) into busy using account;
    return not busy;
  end if;
  return not exists (select 1 from bulk_operations where account_id = account);
end $$;

do $$
begin
  if exists (select 1 from pg_extension where extname = 'citus') then
    perform distribute_tables();
  end if;
end $$;

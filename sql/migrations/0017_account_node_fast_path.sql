-- The API fast path's statements (src/contacts/fast-path.ts) as statements on ONE table each, with
-- their checks in the two functions below (issue 40 item 2, bench/findings/2026-11-29-one-table-statements-on-account-node.md).
--
-- Before, a GET joined cache_versions to contacts, and a PATCH and a POST joined cache_versions,
-- bulk_operations and seed_addresses around their write. On Citus such a join of colocated tables
-- goes through the router planner: 390 µs of the account's node per GET (pgbench, prepared), where
-- a statement on contacts alone takes Citus's fast path, 53-65 µs, and 38-41 µs as one PostgreSQL.
-- So the checks move into functions that read the node's own tables without Citus:
--
-- - contact_versions(account): the account's cache counters, [keys, schema], [0, 0] without a row
--   (as 0002 says). The GET calls it with the contact's account column, so Citus evaluates it where
--   the contact is read: a node with shards, which has a copy of every reference table (a
--   coordinator need not have one).
-- - contact_write_admitted(account, keys, schema, seed): true when the counters are still the ones
--   the API cached, no bulk operation of the account is recorded, `seed` (the identity of a new
--   contact, null for a patch) is no seed address of the account, and then the account's write lock
--   is taken and its check after the lock passes (0010's contact_write_lock; on Citus its body
--   below). A PATCH and a POST call it with constants: Citus evaluates such a call on the node the statement enters, before it
--   routes the statement. So on Citus it answers true only on the node of the account's shards, where
--   the bulk writers take the lock (0007); anywhere else false, and the API takes its plain path.
--
-- On Citus cache_versions becomes a reference table, a copy on every node, so that both functions
-- read it on the node where they run, by its one shard's name, which is fixed once the table is made
-- (written into the function bodies below). Its writers (cache_changed, 0006) are rare: key and
-- schema changes, which now commit on every node.
create function install_fast_path_checks(citus boolean) returns void language plpgsql as $$
declare
  versions text := 'cache_versions';
begin
  if citus then
    select shard_name('cache_versions'::regclass, s.shardid) into strict versions
    from pg_dist_shard s where s.logicalrelid = 'cache_versions'::regclass;
  end if;
  execute format($f$
    create or replace function contact_versions(account uuid) returns bigint[] language plpgsql stable as $body$
    declare
      v bigint[];
    begin
      select array[keys, schema] into v from %s where account_id = account;
      return coalesce(v, array[0, 0]::bigint[]);
    end $body$ $f$, versions);
  if not citus then
    execute $f$
      create or replace function contact_write_admitted(account uuid, keys bigint, schema bigint, seed uuid)
      returns boolean language plpgsql volatile as $body$
      declare
        v bigint[] := contact_versions(account);
      begin
        if v[1] <> keys or v[2] <> schema
           or exists (select 1 from bulk_operations b where b.account_id = account)
           or exists (select 1 from seed_addresses s where s.account_id = account and s.email_md5 = seed) then
          return false;
        end if;
        return contact_write_lock(account);
      end $body$ $f$;
    return;
  end if;
  -- 0010's contact_write_lock for Citus, in two: contact_write_lock_here, the lock and the check
  -- after it on the node where it runs, which contact_write_admitted calls, and contact_write_lock,
  -- the function Citus delegates to the account's node, which only calls it (a call of a delegated
  -- function inside another costs Citus's delegation checks). The shard of bulk_operations is named
  -- from its id at once: 0007 looked it up through pg_dist_partition, and guarded against a database
  -- without Citus's catalog, which a database on this path always has. Each EXECUTE is parsed and
  -- planned anew: the old body cost 338 µs a call (pgbench, a prepared `select contact_write_lock(…)`
  -- on the account's node). From here on this file is the home of its Citus body.
  execute $f$
    create or replace function contact_write_lock_here(account uuid) returns boolean language plpgsql volatile as $body$
    declare
      busy boolean;
    begin
      if pg_advisory_xact_lock_shared(hashtextextended(account::text, 0)) is null then null; end if;
      execute format('select exists (select 1 from %s where account_id = $1)',
                     shard_name('bulk_operations'::regclass,
                                get_shard_id_for_distribution_column('bulk_operations', account)))
        into busy using account;
      return not busy;
    end $body$ $f$;
  execute $f$
    create or replace function contact_write_lock(account uuid) returns boolean language plpgsql volatile as $body$
    begin
      return contact_write_lock_here(account);
    end $body$ $f$;
  -- STABLE, which it is not (it takes a lock): Citus evaluates a stable call of constants once,
  -- before routing, where it refuses a volatile one in an UPDATE. Its lock inside stays volatile,
  -- so the check after the lock runs with a fresh snapshot (as 0008's contact_write_ok).
  -- The bulk-operation and seed checks read the account's shards of those tables, whose names
  -- depend on the account: dynamic SQL, one statement for both.
  execute $f$
    create or replace function contact_write_admitted(account uuid, keys bigint, schema bigint, seed uuid)
    returns boolean language plpgsql stable as $body$
    declare
      shard bigint := get_shard_id_for_distribution_column('contacts', account);
      v bigint[];
      busy boolean;
    begin
      if not exists (select 1 from pg_dist_placement p
                     where p.shardid = shard and p.groupid = (select groupid from pg_dist_local_group)) then
        return false;
      end if;
      v := contact_versions(account);
      if v[1] <> keys or v[2] <> schema then
        return false;
      end if;
      execute format('select exists (select 1 from %s where account_id = $1)
                          or exists (select 1 from %s where account_id = $1 and email_md5 = $2)',
                     shard_name('bulk_operations'::regclass, get_shard_id_for_distribution_column('bulk_operations', account)),
                     shard_name('seed_addresses'::regclass, get_shard_id_for_distribution_column('seed_addresses', account)))
        into busy using account, seed;
      if busy then
        return false;
      end if;
      return contact_write_lock_here(account);
    end $body$ $f$;
  perform create_distributed_function('contact_write_lock_here(uuid)');
  perform create_distributed_function('contact_versions(uuid)');
  perform create_distributed_function('contact_write_admitted(uuid,bigint,bigint,uuid)');
end $$;

-- cache_versions as a reference table (its foreign key to accounts, a reference table too, is made
-- again after: Citus refuses to convert a table that has one); nothing when it is one already.
create function make_cache_versions_reference() returns void language plpgsql as $$
begin
  if exists (select 1 from pg_dist_partition
             where logicalrelid = 'cache_versions'::regclass and partmethod = 'n' and repmodel = 't') then
    return;
  end if;
  alter table cache_versions drop constraint cache_versions_account_id_fkey;
  perform undistribute_table('cache_versions');
  perform create_reference_table('cache_versions');
  alter table cache_versions add constraint cache_versions_account_id_fkey
    foreign key (account_id) references accounts (id) on delete cascade;
end $$;

do $$
begin
  if is_distributed('contacts') then
    perform make_cache_versions_reference();
    perform install_fast_path_checks(true);
  else
    perform install_fast_path_checks(false);
  end if;
end $$;

-- 0007's distribute_by_account, which every distribute_tables since calls for cache_versions too,
-- behind one that leaves a reference table as it is, so that `citus distribute` run again finds
-- nothing to do.
alter function distribute_by_account(regclass) rename to distribute_by_account_0007;
create function distribute_by_account(t regclass) returns void language plpgsql as $$
declare
  reference boolean;
begin
  if to_regclass('pg_catalog.pg_dist_partition') is not null then
    -- Citus's catalog only in dynamic SQL, as in 0007.
    execute $q$ select exists (select 1 from pg_catalog.pg_dist_partition
                               where logicalrelid = $1 and partmethod = 'n' and repmodel = 't') $q$
      into reference using t;
    if reference then
      return;
    end if;
  end if;
  perform distribute_by_account_0007(t);
end $$;

-- A database that gets Citus later (`citus distribute`): 0016's distribute_tables, then these.
alter function distribute_tables() rename to distribute_tables_0016;
create function distribute_tables() returns void language plpgsql as $$
begin
  perform distribute_tables_0016();
  perform make_cache_versions_reference();
  perform install_fast_path_checks(true);
end $$;

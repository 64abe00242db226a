-- The single write's guard (0003, 0007, 0008) in the form each kind of database needs, so that on one
-- PostgreSQL it is ONE PL/pgSQL frame with no catalog lookup (issue 35 item 5,
-- bench/findings/2026-11-27-write-guard-one-frame.md). From here on this file is the home of both functions' bodies.
--
-- Where the earlier forms cost: the fast path's create calls contact_write_ok, a STABLE wrapper
-- (0008) over the VOLATILE contact_write_lock, and contact_write_lock looks up Citus's catalog with
-- to_regclass on every call (0007). Counted with valgrind, one create's guard cost the server 54,000
-- instructions (14 % of the create's); a single volatile frame without the lookup 39,000, and 32,000
-- with its lock as a simple expression (below).
--
-- - One PostgreSQL: both functions are the same VOLATILE body. Volatile, so the check after the
--   lock runs with a fresh snapshot (0003); nothing needs the STABLE label there, which only Citus's
--   planner reads (0008).
-- - Citus: 0007's lock, which reads the bulk_operations shard on the node, and 0008's STABLE wrapper
--   that lets Citus push the create down whole. distribute_tables installs this form once it has
--   distributed the tables, so a database that gets Citus later (`citus distribute`) gets it too.
create function install_write_guard(citus boolean) returns void language plpgsql as $$
declare
  -- Takes the account's lock SHARED until the caller's transaction ends, then says whether still no
  -- bulk operation of the account is recorded. The key is hashed from the uuid's canonical text,
  -- as account_bulk_lock (0007, 0018) hashes it.
  -- The lock as an IF's simple expression, not PERFORM, which runs it as a query: 7,000 fewer
  -- instructions a call (valgrind, bench/findings/2026-11-27-write-guard-one-frame.md). The check stays a query of its own.
  plain text := $body$
begin
  if pg_advisory_xact_lock_shared(hashtextextended(account::text, 0)) is null then null; end if;
  return not exists (select 1 from bulk_operations where account_id = account);
end $body$;
begin
  if not citus then
    execute format('create or replace function contact_write_lock(account uuid) returns boolean
                    language plpgsql volatile as %L', plain);
    execute format('create or replace function contact_write_ok(account uuid) returns boolean
                    language plpgsql volatile as %L', plain);
    return;
  end if;
  -- On Citus the lock runs on the node of the account's shards, inside a query on a shard, where a
  -- query of the distributed table bulk_operations is refused: it reads the shard itself.
  create or replace function contact_write_lock(account uuid) returns boolean language plpgsql volatile as $f$
  declare
    shard text;
    busy boolean;
  begin
    perform pg_advisory_xact_lock_shared(hashtextextended(account::text, 0));
    -- Citus's catalogs only in dynamic SQL: a database with Citus loaded need not have them yet.
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
  end $f$;
  -- The lie of 0008, kept narrow: the lock inside stays volatile (fresh snapshot for its check).
  create or replace function contact_write_ok(account uuid) returns boolean language plpgsql stable as $f$
  begin
    return contact_write_lock(account);
  end $f$;
end $$;

-- 0008's distribute_tables, unchanged, behind one that installs the Citus form after it: the
-- functions are distributed by then, so Citus sends their new bodies to every worker, as it does
-- for the statement below on a database that had Citus from the start.
alter function distribute_tables() rename to distribute_account_tables;
create function distribute_tables() returns void language plpgsql as $$
begin
  perform distribute_account_tables();
  perform install_write_guard(true);
end $$;

select install_write_guard(exists (select 1 from pg_extension where extname = 'citus'));

-- A write's checks in static SQL, run once per write, where the row is (issue 40 item 2,
-- bench/findings/2026-11-29-write-checks-in-static-sql.md).
--
-- 0017's contact_write_admitted took constants: Citus evaluated it where the statement entered,
-- before routing, and again in the plan it caches for a local shard, so it ran twice, and had to
-- check that it ran on the account's node. It read the account's shards of bulk_operations and
-- seed_addresses, whose names depend on the account: dynamic SQL, parsed and planned on every call.
-- pgbench, one client, through the account's worker: a PATCH 310-360 µs with no checks, 460-500
-- with 0017's, 370-390 with these; a POST 240, 445-480, 320-390 (the seed check alone had cost
-- 250-300 µs).
--
-- So:
-- - On Citus bulk_operations becomes a reference table, as cache_versions did in 0017: a copy on every
--   node under one fixed name, read statically. Its writes are rare (a hold and its release per
--   import or schema change, an estimate per merge batch of 100,000 rows) and now commit on every
--   node.
-- - seed_addresses stays distributed: as a reference table it made Citus run every merge batch's
--   plan statement as 32 tasks, one per shard (an INSERT … SELECT that joins a reference table is
--   never pruned to one). Instead cache_versions gets a third counter, `seeds`, moved by every change
--   of the account's seed addresses (seeds_changed, below; the admin CLI's `seed add` calls it), and
--   a create looks for a seed only when the account has had one. On Citus that look is dynamic SQL
--   on the account's shard, so only accounts with seeds pay for it.
--   A seed inserted by hand in SQL must call seeds_changed in the same transaction, or the fast path
--   may create a contact for its address:
--     begin; insert into seed_addresses …; select seeds_changed('<account id>'); commit;
-- - The checks take a column of the row as argument (below), which makes Citus leave them to the
--   shard's own plan: they run once, with the row, on the node that holds it.
--
-- From here on this file is the home of these functions' bodies, on both engines, made from ONE
-- text with the tables' names put in (on Citus the reference tables' shards: a function running
-- inside a shard's query cannot query a distributed table):
-- - contact_versions(account): the account's [keys, schema] counters, [0, 0] without a row (0002).
-- - contact_write_lock_here(account): the account's write lock shared, then true when no bulk
--   operation of the account is recorded, read with a fresh snapshot (0003's protocol).
--   contact_write_lock(account), the plain path's, only calls it: on Citus Citus delegates that one to
--   the node of the account's shards (0007), where the bulk writers take the lock.
-- - seed_here(account, email_md5): whether it is a seed address of the account, read on this node.
-- - contact_write_admitted(email_md5, account, keys, schema, creating): true when the counters are
--   the ones the API cached, no bulk operation is recorded, a created contact's email_md5 is no seed
--   address, and then contact_write_lock_here. A PATCH's WHERE.
-- - contact_create_admitted(email_md5, account, keys, schema): the same for a create, in its
--   RETURNING, raising when it refuses.
-- - account_bulk_lock(account, exclusive, hold): the bulk side. Given the bulk operation its caller
--   recorded, it also refuses to go on unless that row is visible where it runs: a hold commits on
--   every node in two phases, and a node that failed between them has the row only once Citus
--   recovers the transaction; until then its single writes would not see the hold.

alter table cache_versions add column seeds bigint not null default 0;

-- Moves the account's seeds counter: in the transaction of every change of its seed addresses.
create function seeds_changed(account uuid) returns void language sql as $$
  insert into cache_versions as v (account_id, seeds) values (account, 1)
  on conflict (account_id) do update set seeds = v.seeds + 1;
$$;

-- Seeds added before this migration.
insert into cache_versions as v (account_id, seeds)
select account_id, 1 from seed_addresses group by account_id
on conflict (account_id) do update set seeds = v.seeds + 1;

-- `t` as a reference table, its foreign keys made again after (Citus refuses to convert a table that
-- has one); nothing when it is one already.
create function make_reference_table(t regclass) returns void language plpgsql as $$
declare
  -- By name: undistribute_table makes the table anew, under another oid.
  name text := t::text;
  fk record;
  fks text[] := '{}';
begin
  if exists (select 1 from pg_dist_partition where logicalrelid = t and partmethod = 'n' and repmodel = 't') then
    return;
  end if;
  for fk in select conname, pg_get_constraintdef(oid) as def from pg_constraint
            where conrelid = t and contype = 'f' loop
    execute format('alter table %s drop constraint %I', name, fk.conname);
    fks := fks || format('alter table %s add constraint %I %s', name, fk.conname, fk.def);
  end loop;
  if exists (select 1 from pg_dist_partition where logicalrelid = t) then
    perform undistribute_table(name::regclass);
  end if;
  perform create_reference_table(name::regclass);
  for i in 1 .. coalesce(array_length(fks, 1), 0) loop
    execute fks[i];
  end loop;
end $$;

-- The name a function reads `t` by on the node where it runs: its reference shard on Citus.
create function checked_table(t regclass, citus boolean) returns text language plpgsql stable as $$
declare
  name text := t::text;
begin
  if citus then
    execute 'select shard_name($1, s.shardid) from pg_dist_shard s where s.logicalrelid = $1' into strict name using t;
  end if;
  return name;
end $$;

-- 0017's distribute_tables calls this after it made cache_versions a reference table, so a database
-- that gets Citus later (`citus distribute`) gets these too.
create or replace function install_fast_path_checks(citus boolean) returns void language plpgsql as $$
declare
  versions text;
  bulk text;
begin
  if citus then
    perform make_reference_table('cache_versions');
    perform make_reference_table('bulk_operations');
  end if;
  versions := checked_table('cache_versions', citus);
  bulk := checked_table('bulk_operations', citus);

  execute format($f$
    create or replace function contact_versions(account uuid) returns bigint[] language plpgsql stable as $body$
    declare
      v bigint[];
    begin
      select array[keys, schema] into v from %s where account_id = account;
      return coalesce(v, array[0, 0]::bigint[]);
    end $body$ $f$, versions);

  -- VOLATILE: its check runs with a snapshot taken after the lock was granted, so it sees a hold that
  -- committed while it waited.
  execute format($f$
    create or replace function contact_write_lock_here(account uuid) returns boolean language plpgsql volatile as $body$
    begin
      perform pg_advisory_xact_lock_shared(hashtextextended(account::text, 0));
      return not exists (select 1 from %s where account_id = account);
    end $body$ $f$, bulk);

  execute $f$
    create or replace function contact_write_lock(account uuid) returns boolean language plpgsql volatile as $body$
    begin
      return contact_write_lock_here(account);
    end $body$ $f$;

  -- The account's shard of seed_addresses on Citus (its name depends on the account), the table on
  -- one PostgreSQL.
  if citus then
    execute $f$
      create or replace function seed_here(account uuid, email_md5 uuid) returns boolean language plpgsql stable as $body$
      declare
        found boolean;
      begin
        execute format('select exists (select 1 from %s where account_id = $1 and email_md5 = $2)',
                       shard_name('seed_addresses'::regclass,
                                  get_shard_id_for_distribution_column('seed_addresses', account)))
          into found using account, email_md5;
        return found;
      end $body$ $f$;
  else
    execute $f$
      create or replace function seed_here(account uuid, email_md5 uuid) returns boolean language sql stable as $body$
        select exists (select 1 from seed_addresses s where s.account_id = $1 and s.email_md5 = $2)
      $body$ $f$;
  end if;

  -- IMMUTABLE, which it is not (it reads tables and takes a lock), so that Citus accepts it in a
  -- write's WHERE and RETURNING with a column of the row as argument, `email_md5`; that argument is
  -- what makes it run with the row, once, on the node that holds the row's shard, where the bulk
  -- writers take the lock. With constant arguments Citus evaluated it where the statement entered,
  -- before routing, and again in the plan it caches for a local shard: 0017 had to check the node,
  -- and paid twice. No planner folds a call with a column argument into a constant. The lock inside
  -- stays volatile.
  -- creating: also refuse when email_md5 is a seed address of the account (a new contact's rule),
  -- looked for only when the account has had one.
  execute format($f$
    create or replace function contact_write_admitted(email_md5 uuid, account uuid, keys bigint, schema bigint,
                                                      creating boolean)
    returns boolean language plpgsql immutable as $body$
    declare
      v bigint[];
    begin
      select array[c.keys, c.schema, c.seeds] into v from %s c where c.account_id = account;
      if coalesce(v[1], 0) <> keys or coalesce(v[2], 0) <> schema
         or exists (select 1 from %s b where b.account_id = account)
         or (creating and coalesce(v[3], 0) > 0 and seed_here(account, $1)) then
        return false;
      end if;
      return contact_write_lock_here(account);
    end $body$ $f$, versions, bulk);

  -- A create's check in its RETURNING, after the row is in: an INSERT has no WHERE. It raises when the
  -- checks refuse, so that the statement, and with it the row, is rolled back (src/contacts/fast-path.ts
  -- takes the code to mean "use the plain path").
  execute $f$
    create or replace function contact_create_admitted(email_md5 uuid, account uuid, keys bigint, schema bigint)
    returns boolean language plpgsql immutable as $body$
    begin
      if not contact_write_admitted(email_md5, account, keys, schema, true) then
        raise exception 'the fast path''s checks refused this create' using errcode = 'CW001';
      end if;
      return true;
    end $body$ $f$;

  -- `hold`: the bulk operation the caller recorded (see the header). 0007's two-argument form, the
  -- lock alone, stays for the merge batches' shared hold.
  execute format($f$
    create or replace function account_bulk_lock(account uuid, exclusive boolean, hold uuid)
    returns void language plpgsql volatile as $body$
    begin
      if exclusive then
        perform pg_advisory_xact_lock(hashtextextended(account::text, 0));
      else
        perform pg_advisory_xact_lock_shared(hashtextextended(account::text, 0));
      end if;
      if not exists (select 1 from %s where account_id = account and id = hold) then
        raise exception 'bulk operation %% of account %% is not yet visible on this node', hold, account
          using errcode = '55000', hint = 'Its two-phase commit is being recovered; try again.';
      end if;
    end $body$ $f$, bulk);

  if citus then
    perform create_distributed_function('contact_write_lock_here(uuid)');
    perform create_distributed_function('contact_versions(uuid)');
    perform create_distributed_function('seed_here(uuid,uuid)');
    perform create_distributed_function('contact_write_admitted(uuid,uuid,bigint,bigint,boolean)');
    perform create_distributed_function('contact_create_admitted(uuid,uuid,bigint,bigint)');
    -- Where 0007's two-argument one ran: on the node of the account's shards.
    perform create_distributed_function('account_bulk_lock(uuid,boolean,uuid)', 'account',
      colocate_with => 'contacts', force_delegation => true);
  end if;
end $$;

-- 0017's, with constant arguments.
drop function contact_write_admitted(uuid, bigint, bigint, uuid);

do $$
begin
  perform install_fast_path_checks(is_distributed('contacts'));
end $$;

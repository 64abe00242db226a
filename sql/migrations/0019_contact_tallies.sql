-- Exact per-account contact tallies for GET /v1/contact-stats (src/search/stats.ts): the account's
-- contacts, enabled contacts, and contacts per brand id, read by summing a few rows instead of
-- counting millions of contacts.
--
-- contact_tallies holds DELTAS, appended by every writer of contacts in its own transaction; the
-- tallies are their sum. One counter row per account would make every concurrent write of an
-- account wait on that row's lock; appended rows take no lock a writer of the same account waits
-- on. src/search/stats.ts replaces an account's rows by their sums (compaction), when a stats read
-- finds many and from the worker's loop.
--
-- Who appends (every writer of contacts, each write tallied exactly once):
-- - the single writes (API create, merge-create, disable, brand add and removal, erasure): the
--   row-level triggers below. A trigger that does not fire costs nothing measurable: its WHEN clause
--   runs in C. An INSERT fires only for first_source 'api' (an import's adds are 'import'), an
--   UPDATE only when it assigns enabled or brand_ids and changes one of them (a PATCH assigns
--   neither: nothing fires), a DELETE always.
-- - an import's merge batches (sql/merge/insert-batch.sql, merge-batch.sql): they tally their adds
--   and updates in one statement per batch piece, and set contact_tallies.explicit to 'on' for their
--   transaction, which keeps the UPDATE trigger from counting their updates again. A per-row trigger
--   costs 20-30 µs per fired row; import B of the bench changes the brands of most of its contacts.
--   Any other bulk writer of contacts does the same: set it, then append its own deltas.
--
-- brand_id null: the account's totals (contacts, enabled); a brand's row: contacts carrying that
-- brand id (enabled stays 0). Brand ids count whether the brand is deleted or not (a deleted brand's
-- id stays on its contacts); the stats list the live brands.
create table contact_tallies (
  account_id uuid not null,
  -- Random: appended by triggers on a Citus worker's shard, where no cluster-wide sequence is at hand.
  id         uuid not null default gen_random_uuid(),
  brand_id   uuid,
  contacts   bigint not null,
  enabled    bigint not null,
  primary key (account_id, id)
);

-- On Citus: one connection per node for the whole migration (as 0013), and triggers allowed on a
-- distributed table: each runs on the shard's node, in the writing statement's transaction there.
set local citus.multi_shard_modify_mode to 'sequential';
set local citus.enable_unsafe_triggers to on;
select distribute_by_account('contact_tallies');

-- The triggers and what they call, for one engine: contact_tallied(account, contacts, enabled,
-- gained, lost) appends one write's deltas (the totals row when contacts or enabled moved, +1 per
-- gained brand id, -1 per lost one). Plain PostgreSQL: a static INSERT. Citus: the trigger runs in a
-- shard's statement on the account's node, where a statement on the distributed table is refused,
-- so it appends to the account's shard of contact_tallies (colocated with contacts, so on the same
-- node), named from the account. One text for both: $1-$5 are the function's arguments in the
-- static form and the EXECUTE's in the other.
create function install_contact_tallies(citus boolean) returns void language plpgsql as $$
declare
  append constant text := $s$
    insert into %s (account_id, brand_id, contacts, enabled)
    select $1, null, $2, $3 where $2 <> 0 or $3 <> 0
    union all
    select $1, b, 1, 0 from unnest($4) b
    union all
    select $1, b, -1, 0 from unnest($5) b $s$;
begin
  if citus then
    execute format($f$
      create or replace function contact_tallied(account uuid, contacts int, enabled int, gained uuid[], lost uuid[])
      returns void language plpgsql volatile as $body$
      begin
        execute format(%L, shard_name('contact_tallies'::regclass,
                                      get_shard_id_for_distribution_column('contact_tallies', account)))
          using account, contacts, enabled, gained, lost;
      end $body$ $f$, append);
  else
    execute format($f$
      create or replace function contact_tallied(account uuid, contacts int, enabled int, gained uuid[], lost uuid[])
      returns void language plpgsql volatile as $body$
      begin
        %s;
      end $body$ $f$, format(append, 'contact_tallies'));
  end if;

  create or replace function contact_tally_trigger() returns trigger language plpgsql volatile as $body$
  begin
    if tg_op = 'INSERT' then
      perform contact_tallied(new.account_id, 1, new.enabled::int, new.brand_ids, '{}');
    elsif tg_op = 'DELETE' then
      perform contact_tallied(old.account_id, -1, -old.enabled::int, '{}', old.brand_ids);
    else
      perform contact_tallied(new.account_id, 0, new.enabled::int - old.enabled::int,
                              array(select b from unnest(new.brand_ids) b where b <> all (old.brand_ids)),
                              array(select b from unnest(old.brand_ids) b where b <> all (new.brand_ids)));
    end if;
    return null;
  end $body$;

  if citus then
    perform create_distributed_function('contact_tallied(uuid,integer,integer,uuid[],uuid[])');
    perform create_distributed_function('contact_tally_trigger()');
  end if;

  drop trigger if exists contacts_tally_insert on contacts;
  drop trigger if exists contacts_tally_update on contacts;
  drop trigger if exists contacts_tally_delete on contacts;
  -- An import's adds ('import') are tallied by its merge batch.
  create trigger contacts_tally_insert after insert on contacts
    for each row when (new.first_source = 'api')
    execute function contact_tally_trigger();
  -- The merge batches assign both columns to every contact they update and tally those themselves.
  create trigger contacts_tally_update after update of enabled, brand_ids on contacts
    for each row when ((old.enabled <> new.enabled or old.brand_ids <> new.brand_ids)
                       and current_setting('contact_tallies.explicit', true) is distinct from 'on')
    execute function contact_tally_trigger();
  create trigger contacts_tally_delete after delete on contacts
    for each row when (current_setting('contact_tallies.explicit', true) is distinct from 'on')
    execute function contact_tally_trigger();
end $$;

select install_contact_tallies(is_distributed('contacts'));

-- The contacts already there.
insert into contact_tallies (account_id, brand_id, contacts, enabled)
select account_id, null, count(*), count(*) filter (where enabled)
from contacts
group by account_id;
insert into contact_tallies (account_id, brand_id, contacts, enabled)
select c.account_id, b.id, count(*), 0
from contacts c
cross join unnest(c.brand_ids) as b(id)
group by c.account_id, b.id;

-- A database that gets Citus later (`citus distribute`): 0018's distribute_tables with the triggers
-- out of the way (Citus refuses to distribute a table that has triggers), then the tallies
-- distributed with their rows and the triggers made again in their Citus form.
alter function distribute_tables() rename to distribute_tables_0018;
create function distribute_tables() returns void language plpgsql as $$
begin
  -- Run again on a cluster, the triggers' DDL goes to every shard: over one connection per node, or
  -- Citus refuses the function DDL after it.
  set local citus.multi_shard_modify_mode to 'sequential';
  set local citus.enable_unsafe_triggers to on;
  drop trigger if exists contacts_tally_insert on contacts;
  drop trigger if exists contacts_tally_update on contacts;
  drop trigger if exists contacts_tally_delete on contacts;
  perform distribute_tables_0018();
  perform distribute_by_account('contact_tallies');
  perform truncate_local_data_after_distributing_table(logicalrelid)
  from pg_dist_partition where logicalrelid::text = 'contact_tallies';
  perform install_contact_tallies(true);
end $$;

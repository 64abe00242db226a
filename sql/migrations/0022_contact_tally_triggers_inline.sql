-- The contact tallies' triggers (0019) on one PostgreSQL, in a cheaper form: one function per event
-- with its INSERTs inline, a plain VALUES row for the totals, and the brands' rows only when there
-- are brands. 0019's form calls one function for every event, which branches on the event and calls
-- contact_tallied, whose one INSERT unions three SELECTs. A loop of 20,000 API creates in one
-- statement on the bench machine: 53-84 µs an insert without a trigger, 133-177 with 0019's, 97-105
-- with this one (no brand; one brand: 57-88, 135-164, 140-200), bench/findings/2026-12-06-contact-tallies-cost.md.
--
-- On a Citus cluster nothing changes: there the trigger appends to the account's shard of
-- contact_tallies through contact_tallied's dynamic SQL, and `citus distribute` (0019's
-- distribute_tables) installs that form, which replaces these triggers.
create function contact_tally_insert() returns trigger language plpgsql volatile as $$
begin
  insert into contact_tallies (account_id, brand_id, contacts, enabled)
  values (new.account_id, null, 1, new.enabled::int);
  if cardinality(new.brand_ids) > 0 then
    insert into contact_tallies (account_id, brand_id, contacts, enabled)
    select new.account_id, b, 1, 0 from unnest(new.brand_ids) b;
  end if;
  return null;
end $$;

create function contact_tally_update() returns trigger language plpgsql volatile as $$
begin
  if old.enabled <> new.enabled then
    insert into contact_tallies (account_id, brand_id, contacts, enabled)
    values (new.account_id, null, 0, new.enabled::int - old.enabled::int);
  end if;
  if old.brand_ids <> new.brand_ids then
    insert into contact_tallies (account_id, brand_id, contacts, enabled)
    select new.account_id, b, 1, 0 from unnest(new.brand_ids) b where b <> all (old.brand_ids)
    union all
    select new.account_id, b, -1, 0 from unnest(old.brand_ids) b where b <> all (new.brand_ids);
  end if;
  return null;
end $$;

create function contact_tally_delete() returns trigger language plpgsql volatile as $$
begin
  insert into contact_tallies (account_id, brand_id, contacts, enabled)
  values (old.account_id, null, -1, -old.enabled::int);
  if cardinality(old.brand_ids) > 0 then
    insert into contact_tallies (account_id, brand_id, contacts, enabled)
    select old.account_id, b, -1, 0 from unnest(old.brand_ids) b;
  end if;
  return null;
end $$;

-- The same triggers as 0019 makes them (their WHEN clauses say when each fires), calling these.
do $$
begin
  if is_distributed('contacts') then
    return;
  end if;
  drop trigger contacts_tally_insert on contacts;
  drop trigger contacts_tally_update on contacts;
  drop trigger contacts_tally_delete on contacts;
  create trigger contacts_tally_insert after insert on contacts
    for each row when (new.first_source = 'api')
    execute function contact_tally_insert();
  create trigger contacts_tally_update after update of enabled, brand_ids on contacts
    for each row when ((old.enabled <> new.enabled or old.brand_ids <> new.brand_ids)
                       and current_setting('contact_tallies.explicit', true) is distinct from 'on')
    execute function contact_tally_update();
  create trigger contacts_tally_delete after delete on contacts
    for each row when (current_setting('contact_tallies.explicit', true) is distinct from 'on')
    execute function contact_tally_delete();
end $$;

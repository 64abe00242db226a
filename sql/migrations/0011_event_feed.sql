-- The way out for brand-subscribe events: the feed (GET /v1/events) and the webhook relay
-- (src/events, worker/events). docs/events-and-webhooks.md.
--
-- Why a position and not the id: an id is taken when a set is inserted, but the set becomes
-- visible when its transaction commits, and transactions commit out of id order (a merge batch
-- holds its ids for seconds while single writes commit around it). A reader that moved past the
-- highest id it saw would skip a set that commits late. So the worker's sequencer gives every
-- committed set the next position of its account, under the account's head row lock: sequencing
-- transactions of one account run one after another, each sees the sets committed before it, and
-- a reader that sees a position sees every lower one. Positions are the feed's order.
-- On Citus: one connection per node for the whole migration, since it alters distributed tables
-- and then functions, which Citus refuses after parallel work in the same transaction. A plain
-- PostgreSQL keeps the setting as an unused placeholder.
set local citus.multi_shard_modify_mode to 'sequential';
alter table brand_subscribe_events add column position bigint;
-- How many events a set holds, known without reading its array (TOASTed: 240 KB for a merge batch's
-- set): a feed page finds the sets it needs from their sizes and reads only those, only the slice
-- it returns.
alter table brand_subscribe_events add column size integer generated always as (cardinality(email_md5s)) stored;
-- The contacts' addresses, in the order of email_md5s: the events' `email`, so that a feed page reads
-- no contact (1,000 lookups were 40 % of a page). The contact's stored address, which a write never
-- changes. An erased contact leaves a null in both arrays (the same place: the events' order holds).
alter table brand_subscribe_events add column emails text[];
-- Sets written before this migration get theirs from the contacts, one account at a time (a
-- statement Citus routes to one node); a contact gone since leaves a null, and its event is not shown.
do $$
declare
  a uuid;
begin
  for a in select distinct account_id from brand_subscribe_events loop
    update brand_subscribe_events e
    set emails = array(
      select c.email
      from unnest(e.email_md5s) with ordinality as u(md5, n)
      left join contacts c on c.account_id = a and c.email_md5 = u.md5
      order by u.n)
    where e.account_id = a;
  end loop;
  -- In the block: Citus sends this one to the workers as the text it came in too (see below).
  alter table brand_subscribe_events alter column emails set not null;
end $$;
-- Addresses compress, unlike md5s: lz4 where the server has it, as 0009 does for email_md5s.
do $$
begin
  if exists (select from pg_settings where name = 'default_toast_compression' and 'lz4' = any (enumvals)) then
    alter table brand_subscribe_events alter column emails set compression lz4;
  end if;
end $$;
-- In a block: Citus sends a CREATE INDEX on a distributed table to the workers as the text of the
-- statement it came in, and a migration file sent whole is several ("cannot insert multiple
-- commands into a prepared statement"); PL/pgSQL runs each statement as its own.
do $$
begin
  create unique index brand_subscribe_events_feed
    on brand_subscribe_events (account_id, position) where position is not null;
  -- What the sequencer still has to place: small, since the sequencer keeps up within a tick.
  create index brand_subscribe_events_unsequenced
    on brand_subscribe_events (account_id, id) where position is null;
  -- The retention sweep's range.
  create index brand_subscribe_events_created on brand_subscribe_events (created_at);
end $$;

-- One row per account with events: the sequencer's lock and the last position it gave out, and
-- how far the retention sweep removed the feed (a cursor below that has lost events).
create table event_feed_heads (
  account_id        uuid not null primary key,
  sequenced_through bigint not null default 0,
  pruned_through    bigint not null default 0
);

-- Where an account's events are pushed. The cursor (delivered_position, delivered_index) is the
-- feed's (src/events/cursor.ts): delivered_index events of the set at delivered_position passed, and
-- every event before that position. A new endpoint starts after its account's head, (head + 1, 0):
-- it receives the events that become visible after it was made.
create table webhook_endpoints (
  account_id          uuid not null,
  id                  uuid not null default gen_random_uuid(),
  url                 text not null,
  description         text,
  secret              text not null,
  enabled             boolean not null default true,
  disabled_reason     text,
  created_at          timestamptz not null default now(),
  delivered_position  bigint not null,
  delivered_index     integer not null default 0,
  -- The batch in flight, fixed at its first attempt and resent unchanged until a 2xx: its webhook-id,
  -- the last event it holds and the timestamp in its body.
  batch_id            text,
  batch_position      bigint,
  batch_index         integer,
  batch_timestamp     timestamptz,
  attempts            integer not null default 0,
  next_attempt_at     timestamptz not null default now(),
  -- The relay replica delivering it now (worker/events/relay.ts): no two at once.
  lease_token         uuid,
  lease_until         timestamptz,
  last_success_at     timestamptz,
  last_failure_at     timestamptz,
  last_failure_reason text,
  -- Since when every attempt failed; three days of it disable the endpoint.
  failing_since       timestamptz,
  primary key (account_id, id)
);
create index webhook_endpoints_due on webhook_endpoints (next_attempt_at) where enabled;

select distribute_by_account('event_feed_heads');
select distribute_by_account('webhook_endpoints');

-- A database that gets Citus later (`citus distribute`): 0010's distribute_tables, then these two.
alter function distribute_tables() rename to distribute_tables_0010;
create function distribute_tables() returns void language plpgsql as $$
begin
  perform distribute_tables_0010();
  perform distribute_by_account('event_feed_heads');
  perform distribute_by_account('webhook_endpoints');
  perform truncate_local_data_after_distributing_table(logicalrelid)
  from pg_dist_partition where logicalrelid::text in ('event_feed_heads', 'webhook_endpoints');
end $$;

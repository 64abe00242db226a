-- Erasure, the right to be forgotten (DELETE /v1/contacts/{emailMd5}, POST /v1/contact-erasures;
-- src/contacts/erase.ts). The contact row goes, and its address leaves the recorded events; this
-- table is what remains: that an erasure happened, for the operator (`admin erasures`), never the
-- address. The md5 of a lowercased address is no secret from whoever knows the address, which is
-- the point: an operator can answer "was this person erased, and when".
-- On Citus: one connection per node for the whole migration, since it distributes a table and then
-- replaces a function, which Citus refuses after parallel work in the same transaction (as 0011).
set local citus.multi_shard_modify_mode to 'sequential';
create table contact_erasures (
  account_id uuid not null,
  id         bigint generated always as identity,
  email_md5  uuid not null,
  -- The API key that asked (no foreign key: a key revoked later keeps its erasures' record).
  key_id     uuid,
  erased_at  timestamptz not null default now(),
  primary key (account_id, id)
);

select distribute_by_account('contact_erasures');

-- A database that gets Citus later (`citus distribute`): 0011's distribute_tables, then this one.
alter function distribute_tables() rename to distribute_tables_0011;
create function distribute_tables() returns void language plpgsql as $$
begin
  perform distribute_tables_0011();
  perform distribute_by_account('contact_erasures');
  perform truncate_local_data_after_distributing_table(logicalrelid)
  from pg_dist_partition where logicalrelid::text = 'contact_erasures';
end $$;

-- API processes cache key rows and account schemas in memory (src/auth/cache.ts). Two mechanisms
-- keep them honest:
--
-- 1. cache_versions: per account, a counter moved by every change of the account's keys or of the
--    account row (keys), and one moved by every change of its schema_attributes rows (schema), in
--    the same transaction as the change. A process caches a row together with the counter read in
--    the same snapshot; a statement that finds the counter unchanged knows the row is unchanged in
--    its own snapshot. One index probe replaces re-reading the key, the account and the schema.
--    An account without a row is at 0 for both.
--
-- 2. Notifications on the channel cache_invalidation, after commit, so processes drop what changed
--    within milliseconds instead of finding out through a failed version check:
--      {"table": "api_keys", "accountId": "…", "keyId": "…"}   a key was created, changed or deleted
--      {"table": "accounts", "accountId": "…"}                 an account changed (suspension)
--      {"table": "schema_attributes", "accountId": "…"}        an account's custom attributes changed
--      {"table": "<name>"}                                      the table was truncated: drop everything
--    Correctness does not depend on them: NOTIFY is delivered asynchronously, after the changing
--    client already saw its COMMIT.
create table cache_versions (
  account_id uuid primary key references accounts (id) on delete cascade,
  keys       bigint not null default 0,
  schema     bigint not null default 0
);

create function notify_cache_invalidation(payload json) returns void language sql as $$
  select pg_notify('cache_invalidation', payload::text);
$$;

create function bump_keys_version(account uuid) returns void language sql as $$
  insert into cache_versions as v (account_id, keys) values (account, 1)
  on conflict (account_id) do update set keys = v.keys + 1;
$$;

create function bump_schema_version(account uuid) returns void language sql as $$
  insert into cache_versions as v (account_id, schema) values (account, 1)
  on conflict (account_id) do update set schema = v.schema + 1;
$$;

create function api_keys_cache_invalidation() returns trigger language plpgsql as $$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    perform bump_keys_version(old.account_id);
    perform notify_cache_invalidation(json_build_object('table', 'api_keys', 'accountId', old.account_id, 'keyId', old.id));
  end if;
  -- PostgreSQL folds identical payloads of one transaction into one notification.
  if tg_op = 'INSERT' or (tg_op = 'UPDATE' and (old.account_id, old.id) is distinct from (new.account_id, new.id)) then
    perform bump_keys_version(new.account_id);
    perform notify_cache_invalidation(json_build_object('table', 'api_keys', 'accountId', new.account_id, 'keyId', new.id));
  end if;
  return null;
end $$;

create trigger api_keys_cache_invalidation after insert or update or delete on api_keys
  for each row execute function api_keys_cache_invalidation();

create function accounts_cache_invalidation() returns trigger language plpgsql as $$
begin
  -- A deleted account takes its cache_versions row with it (and had to lose its keys first).
  if tg_op = 'UPDATE' then
    perform bump_keys_version(old.id);
  end if;
  perform notify_cache_invalidation(json_build_object('table', 'accounts', 'accountId', old.id));
  return null;
end $$;

create trigger accounts_cache_invalidation after update or delete on accounts
  for each row execute function accounts_cache_invalidation();

create function schema_attributes_cache_invalidation() returns trigger language plpgsql as $$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    perform bump_schema_version(old.account_id);
    perform notify_cache_invalidation(json_build_object('table', 'schema_attributes', 'accountId', old.account_id));
  end if;
  if tg_op = 'INSERT' or (tg_op = 'UPDATE' and old.account_id is distinct from new.account_id) then
    perform bump_schema_version(new.account_id);
    perform notify_cache_invalidation(json_build_object('table', 'schema_attributes', 'accountId', new.account_id));
  end if;
  return null;
end $$;

create trigger schema_attributes_cache_invalidation after insert or update or delete on schema_attributes
  for each row execute function schema_attributes_cache_invalidation();

-- TRUNCATE fires no row triggers: every account's counter moves and every cache is dropped.
create function truncate_cache_invalidation() returns trigger language plpgsql as $$
begin
  if tg_table_name = 'schema_attributes' then
    insert into cache_versions as v (account_id, schema) select id, 1 from accounts
    on conflict (account_id) do update set schema = v.schema + 1;
  elsif tg_table_name = 'api_keys' then
    insert into cache_versions as v (account_id, keys) select id, 1 from accounts
    on conflict (account_id) do update set keys = v.keys + 1;
  end if;
  perform notify_cache_invalidation(json_build_object('table', tg_table_name));
  return null;
end $$;

create trigger api_keys_truncate_cache_invalidation after truncate on api_keys
  for each statement execute function truncate_cache_invalidation();
create trigger accounts_truncate_cache_invalidation after truncate on accounts
  for each statement execute function truncate_cache_invalidation();
create trigger schema_attributes_truncate_cache_invalidation after truncate on schema_attributes
  for each statement execute function truncate_cache_invalidation();

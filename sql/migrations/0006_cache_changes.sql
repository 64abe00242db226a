-- The caches' invalidation (0002) without triggers. On a Citus cluster a trigger of a distributed
-- table fires on the worker that holds the shard, so its NOTIFY never reaches an API that listens on
-- the coordinator, and Citus refuses to distribute a table with such triggers at all. The writers
-- (the admin CLI, the API's schema changes) call cache_changed in the transaction of their change
-- instead: it moves the account's counter in cache_versions, which keeps every cache correct
-- (src/auth/cache.ts), and notifies on the coordinator, where the API processes listen.
--
-- A change made by hand in SQL must call it too, in the same transaction, or the API may go on
-- trusting a cached key or schema until CACHE_TTL_MS (30 s):
--   begin; update api_keys set revoked_at = now() where id = '…';
--          select cache_changed('<account id>', 'api_keys', '…'); commit;
drop trigger api_keys_cache_invalidation on api_keys;
drop trigger accounts_cache_invalidation on accounts;
drop trigger schema_attributes_cache_invalidation on schema_attributes;
drop trigger api_keys_truncate_cache_invalidation on api_keys;
drop trigger accounts_truncate_cache_invalidation on accounts;
drop trigger schema_attributes_truncate_cache_invalidation on schema_attributes;
drop function api_keys_cache_invalidation();
drop function accounts_cache_invalidation();
drop function schema_attributes_cache_invalidation();
drop function truncate_cache_invalidation();

-- what: 'api_keys' (a key of the account was created, changed or deleted; key_id names it),
-- 'accounts' (the account row changed: suspension) or 'schema_attributes' (its custom attributes).
create function cache_changed(account uuid, what text, key_id uuid default null) returns void
language plpgsql as $$
begin
  if what in ('api_keys', 'accounts') then
    perform bump_keys_version(account);
  elsif what = 'schema_attributes' then
    perform bump_schema_version(account);
  else
    raise exception 'cache_changed: unknown table %', what using errcode = '22023';
  end if;
  perform notify_cache_invalidation(json_strip_nulls(
    json_build_object('table', what, 'accountId', account, 'keyId', key_id)));
end $$;

-- bump_keys_version on an account's deletion (0002's accounts trigger) is gone with the trigger:
-- cache_versions rows go with their account (on delete cascade), and accounts are never deleted.

-- Rate limits per account (src/ratelimit, docs/rate-limits.md): an account's own requests a second
-- and burst, both null for the API's defaults (RATE_LIMIT_PER_SECOND, RATE_LIMIT_BURST). Set by
-- `admin account rate-limit`, which calls cache_changed(account, 'accounts') in the same
-- transaction: the API reads them with the account's key row (src/auth/authenticate.ts), so every
-- replica has the new limits within the notification's milliseconds, as it has a suspension.
-- On Citus `accounts` is a reference table: the ALTERs go to every node. One connection per node,
-- as 0011 and 0012; the constraint in a block, where PL/pgSQL runs each statement on its own (a
-- migration file sent to the workers whole is several commands).
set local citus.multi_shard_modify_mode to 'sequential';
alter table accounts add column rate_limit_per_second integer;
alter table accounts add column rate_limit_burst integer;
do $$
begin
  alter table accounts add constraint accounts_rate_limit check (
    (rate_limit_per_second is null and rate_limit_burst is null)
    or (rate_limit_per_second > 0 and rate_limit_burst > 0));
end $$;

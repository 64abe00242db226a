-- Advisory locks of an account's resources (src/db/locks.ts) taken where the account's shards are.
-- Advisory locks are per node: API replicas connected to different nodes of a Citus cluster
-- (docs/scaling-out.md), or an API and the admin CLI, would each take theirs on their own node and exclude
-- nothing. Delegated on Citus (force_delegation, as contact_write_lock in 0007), a call of one of
-- these alone in a statement runs on the node of the account's shards, in the caller's distributed
-- transaction, and the lock is held there until that transaction ends or its session dies. On one
-- PostgreSQL each is the plain transaction lock. `account` only names the node; `lock` is the key.
create function account_xact_lock(account uuid, lock bigint) returns void language plpgsql volatile as $$
begin
  perform pg_advisory_xact_lock(lock);
end $$;

create function account_try_xact_lock(account uuid, lock bigint) returns boolean language plpgsql volatile as $$
begin
  return pg_try_advisory_xact_lock(lock);
end $$;

do $$
begin
  if is_distributed('contacts') then
    perform create_distributed_function('account_xact_lock(uuid,bigint)', 'account',
      colocate_with => 'contacts', force_delegation => true);
    perform create_distributed_function('account_try_xact_lock(uuid,bigint)', 'account',
      colocate_with => 'contacts', force_delegation => true);
  end if;
end $$;

-- A database that gets Citus later (`citus distribute`): 0015's distribute_tables, then these two.
alter function distribute_tables() rename to distribute_tables_0015;
create function distribute_tables() returns void language plpgsql as $$
begin
  perform distribute_tables_0015();
  perform create_distributed_function('account_xact_lock(uuid,bigint)', 'account',
    colocate_with => 'contacts', force_delegation => true);
  perform create_distributed_function('account_try_xact_lock(uuid,bigint)', 'account',
    colocate_with => 'contacts', force_delegation => true);
end $$;

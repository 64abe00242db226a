-- The write guard of src/contacts/write-guard.ts in a form one SQL statement can call, so that a
-- single contact write is one round trip (src/contacts/fast-path.ts) instead of begin, check, lock,
-- check, write, commit.
--
-- Takes the account's advisory lock SHARED until the caller's transaction ends (the bulk side takes
-- it EXCLUSIVE per batch) and returns whether, now that the lock is held, still no bulk operation of
-- the account is recorded. The caller writes only when it returns true, and looks for a recorded
-- bulk operation in its own statement before calling, so that a write arriving while one runs is
-- refused at once instead of queueing behind the batch.
--
-- Why a VOLATILE plpgsql function: each statement in it takes a fresh snapshot, so the check after
-- the lock sees a bulk_operations row committed while the caller waited for the lock. The calling
-- statement's own snapshot was taken before the wait and would miss it (test/contacts-concurrency
-- .test.ts: "a bulk operation recorded while a write waits for a batch …").
create function contact_write_lock(account uuid) returns boolean language plpgsql volatile as $$
begin
  -- The key is hashed from the uuid's canonical text, as account_bulk_lock (0007, 0018) hashes it.
  perform pg_advisory_xact_lock_shared(hashtextextended(account::text, 0));
  return not exists (select 1 from bulk_operations where account_id = account);
end $$;

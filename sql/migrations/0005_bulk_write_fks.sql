-- The foreign keys from contacts and brand_subscribe_events to accounts cost about 45% of a
-- contact import's merge (EXPLAIN ANALYZE of a 100,000-row batch: one RI trigger call, i.e. one
-- probe of accounts_pkey with a FOR KEY SHARE row lock, per inserted contact and per event).
--
-- They guard nothing the writers do not already guarantee:
-- - every writer of these tables (POST/PATCH /v1/contacts, the import merge) acts for an account
--   it has authenticated (API key) or loaded (the import row) before it writes;
-- - accounts are never deleted (suspension is a flag), so the referenced row cannot disappear
--   under a writer or afterwards, and the FOR KEY SHARE lock each check takes protects nothing.
-- The other tables keep their keys to accounts: they are written a row at a time, where the check
-- costs nothing that matters.
alter table contacts drop constraint if exists contacts_account_id_fkey;
alter table brand_subscribe_events drop constraint if exists brand_subscribe_events_account_id_fkey;

-- The per-row foreign key check of suppression_records cost more than the insert itself (about 5 µs
-- a row: a 10 million record manual import spent 50 s in it). Records are written only by
-- src/suppressions while it holds the list, after finding the list in the account, and lists are
-- never deleted; so the key guarded nothing those writers do not already guarantee.
alter table suppression_records drop constraint suppression_records_account_id_list_id_fkey;

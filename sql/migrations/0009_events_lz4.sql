-- The sets of brand-subscribe events compressed with lz4 instead of pglz, where the server has lz4.
--
-- An import merge batch writes one outbox row per brand with the sorted md5s of the batch's
-- contacts that got it: ~15,000 uuids, 240 KB, at 100,000 rows a batch and 8 brands. TOAST tries
-- to compress every such value and random md5s never compress, so each attempt is lost: pglz spent
-- 3.6-4.1 ms on one (psql, 100 such arrays), lz4 0.1 ms, no compression at all 0.06 ms. That was
-- 1.6 % of PostgreSQL's samples during the merge of 25M rows (bench/findings/2026-11-26-outbox-md5-sets-lz4.md).
-- SET STORAGE EXTERNAL (no attempt at all) would be cheaper still, but Citus does not propagate it
-- to the shards of a distributed table; SET COMPRESSION it propagates, and writes into the shards'
-- definition when the table is distributed later.
--
-- lz4 is optional at PostgreSQL's build: without it the column keeps pglz (a server lists only the
-- methods it was built with in default_toast_compression's values).
do $$
begin
  if exists (select from pg_settings where name = 'default_toast_compression' and 'lz4' = any (enumvals)) then
    alter table brand_subscribe_events alter column email_md5s set compression lz4;
  end if;
end $$;

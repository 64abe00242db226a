-- The fast path of one merge batch (merge-batch.sql is the general one): used
-- when, with single writes drained and refused, neither a contact nor a seed of the account has an
-- email_md5 within the batch's range [md5 of seq $3 + 1, md5 of seq $4] (seq follows email_md5
-- order, so a batch is one narrow key range; see worker/import/merge.ts). Then every row of the
-- batch is an `add` under every strategy, exactly what merge-batch.sql would decide, and the
-- batch is a plain INSERT … SELECT: no probe per row, no materialized plan of the batch. A fresh
-- account takes this path for every batch; a file that overlaps existing contacts does not.
--
-- Events: all of an added contact's brands, as merge-batch.sql writes them, one outbox row per
-- brand with the set of the batch's contacts that got it (sql/migrations/0001_schema.sql), built from what the
-- INSERT returned rather than by reading the batch from the merge table a second time.
--
-- Returns the batch's counts; advance.sql then moves the checkpoint. `rows` is how many staged rows
-- the batch read: fewer than $4 - $3 means the (unlogged) staging lost rows in a crash.
--
-- :"merge_table" is one part of the import's merge table, and seqs are the part's own (see
-- merge-batch.sql).
--
-- $1 account id   $2 import id   $3 last seq of the part already merged   $4 last seq of this batch
-- $5 publish events   $6 import method (api | manual)
with inserted as (
  insert into contacts (account_id, email_md5, email, attributes, brand_ids,
                        first_source, first_import_id, first_import_method)
  select $1::uuid, r.email_md5, r.email, r.attributes, r.brand_ids, 'import', $2::uuid, $6::text
  from :"merge_table" r
  where r.account_id = $1::uuid and r.seq > $3::int8 and r.seq <= $4::int8
  returning email_md5, brand_ids
),

-- `events` counts (contact, brand) events, the sum of the sets' sizes, not outbox rows.
events as (
  insert into brand_subscribe_events (account_id, brand_id, email_md5s, source, import_id)
  select $1::uuid, x.id, array_agg(i.email_md5 order by i.email_md5), 'import', $2::uuid
  from inserted i
  cross join lateral unnest(i.brand_ids) as x(id)
  where $5::bool
  group by x.id
  returning cardinality(email_md5s) as n
)

select (select count(*) from inserted)::int8 as rows,
       (select count(*) from inserted)::int8 as added,
       0::int8 as updated,
       0::int8 as skipped,
       (select coalesce(sum(n), 0) from events)::int8 as events

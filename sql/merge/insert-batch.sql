-- The fast path of one merge batch (merge-batch.sql is the general one): used
-- when, with single writes drained and refused, neither a contact nor a seed of the account has an
-- email_md5 within the batch's range [md5 of seq $3 + 1, md5 of seq $4] (seq follows email_md5
-- order, so a batch is one narrow key range; see worker/import/merge.ts). Then every row of the
-- batch is an `add` under every strategy, exactly what merge-batch.sql would decide, and the
-- batch is a plain INSERT … SELECT: no probe per row, no materialized plan of the batch. A fresh
-- account takes this path for every batch; a file that overlaps existing contacts does not.
--
-- Events: all of an added contact's brands, in the row's order, as merge-batch.sql writes them.
--
-- Returns the batch's counts; advance.sql then moves the checkpoint. `rows` is how many staged rows
-- the batch read: fewer than $4 - $3 means the (unlogged) staging lost rows in a crash.
--
-- $1 account id   $2 import id   $3 last seq already merged (checkpoint)   $4 last seq of this batch
-- $5 publish events   $6 import method (api | manual)
with inserted as (
  insert into contacts (account_id, email_md5, email, attributes, brand_ids,
                        first_source, first_import_id, first_import_method)
  select $1::uuid, r.email_md5, r.email, r.attributes, r.brand_ids, 'import', $2::uuid, $6::text
  from :"merge_table" r
  where r.seq > $3::int8 and r.seq <= $4::int8
  returning 1
),

events as (
  insert into brand_subscribe_events (account_id, email_md5, brand_id, source, import_id)
  select $1::uuid, r.email_md5, x.id, 'import', $2::uuid
  from :"merge_table" r
  cross join lateral unnest(r.brand_ids) as x(id)
  where $5::bool and r.seq > $3::int8 and r.seq <= $4::int8
  returning 1
)

select (select count(*) from inserted)::int8 as rows,
       (select count(*) from inserted)::int8 as added,
       0::int8 as updated,
       0::int8 as skipped,
       (select count(*) from events)::int8 as events

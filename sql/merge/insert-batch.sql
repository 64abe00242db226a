-- The fast path of one merge batch (merge-batch.sql is the general one): used
-- when, with single writes drained and refused, neither a contact nor a seed of the account has an
-- email_md5 within the batch's range [md5 of seq $2 + 1, md5 of seq $3] (seq follows email_md5
-- order, so a batch is one narrow key range; see worker/import/merge.ts). Then every row of the
-- batch is an `add` under every strategy, exactly what merge-batch.sql would decide, and the
-- batch is a plain INSERT … SELECT: no probe per row, no plan of the batch. A fresh account takes
-- this path for every batch; a file that overlaps existing contacts does not.
--
-- Two statements, and a third for the contact tallies when no events are published (split at the `-- name:` lines by worker/import/merge/sql-files.ts), each naming the
-- account on every table so that on a Citus cluster it runs whole on the node of the account's
-- shards. advance.sql then moves the checkpoint.
--
-- :"merge_table" is one part of the import's merge table, and seqs are the part's own (see
-- merge-batch.sql).

-- name: insert
-- The batch's contacts. The statement's row count is the rows the batch read: fewer than $3 - $2
-- means the (unlogged) staging lost rows in a crash.
-- $1 account id   $2 last seq of the part already merged   $3 last seq of this batch
-- $4 import id    $5 import method (api | manual)
insert into contacts (account_id, email_md5, email, attributes, brand_ids,
                      first_source, first_import_id, first_import_method)
select r.account_id, r.email_md5, r.email, r.attributes, r.brand_ids, 'import', $4::uuid, $5::text
from :"merge_table" r
where r.account_id = $1::uuid and r.seq > $2::int8 and r.seq <= $3::int8;

-- name: events
-- All of an added contact's brands, as merge-batch.sql writes them: one outbox row per brand with
-- the set of the batch's contacts that got it (sql/migrations/0001_schema.sql); the caller adds up
-- the sets' sizes, the (contact, brand) events, and takes them as the brands' counts for the
-- contact tallies (`gains`). Run only when the import publishes events.
-- $1 account id   $2 last seq of the part already merged   $3 last seq of this batch   $4 import id
insert into brand_subscribe_events (account_id, brand_id, email_md5s, emails, source, import_id)
select r.account_id, x.id, array_agg(r.email_md5 order by r.email_md5), array_agg(r.email order by r.email_md5),
       'import', $4::uuid
from :"merge_table" r
cross join lateral unnest(r.brand_ids) as x(id)
where r.account_id = $1::uuid and r.seq > $2::int8 and r.seq <= $3::int8
group by r.account_id, x.id
returning brand_id, cardinality(email_md5s) as n;

-- name: gains
-- Each brand of the batch's contacts with how many carry it, for the contact tallies
-- (sql/migrations/0019_contact_tallies.sql; worker/import/merge/batch.ts adds the batch's totals).
-- The events' sets are the same counts: run only when the import publishes none and can assign
-- brands (unnesting the brands costs about 1.4 µs a row, bench/findings/2026-12-06-contact-tallies-cost.md).
-- $1 account id   $2 last seq of the part already merged   $3 last seq of this batch
select x.id as brand_id, count(*) as n
from :"merge_table" r
cross join lateral unnest(r.brand_ids) as x(id)
where r.account_id = $1::uuid and r.seq > $2::int8 and r.seq <= $3::int8
group by x.id;

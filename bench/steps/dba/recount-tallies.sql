-- Step `dba` (and pgloader's after-load SQL), after the shape's upsert and in its transaction: the
-- account's contact tallies (sql/migrations/0019_contact_tallies.sql, what GET /v1/contact-stats
-- sums) recounted from its contacts, as a DBA who bulk-writes contacts keeps them. The upsert runs
-- with contact_tallies.explicit on, as 0019 asks of every bulk writer, so the per-row UPDATE trigger
-- (20-30 µs a fired row: file B of the wide shape changes most contacts' brands) stays out; one scan
-- of the account's contacts here replaces its deltas by their sums: a row for its totals (contacts,
-- enabled) and one per brand id its contacts carry, as 0019 counts the contacts already there.
--
-- $1 account id
with cleared as (
  delete from contact_tallies where account_id = $1::uuid
)
insert into contact_tallies (account_id, brand_id, contacts, enabled)
select $1::uuid, t.brand_id, count(*),
       case when t.brand_id is null then count(*) filter (where c.enabled) else 0 end
from contacts c
cross join lateral (select null::uuid union all select unnest(c.brand_ids)) as t(brand_id)
where c.account_id = $1::uuid
group by t.brand_id

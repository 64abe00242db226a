-- One merge batch of a contact import: the deduplicated staged rows with seq in ($3, $4] applied to
-- the account's contacts with exactly the semantics of a POST /v1/contacts row (spec, rules 3-6),
-- the brand-subscribe events written, and the batch's counts returned. advance.sql then moves the
-- import's checkpoint and counters in the same transaction, so the writes, the events and the
-- checkpoint commit together: a batch is applied exactly once however often the worker dies.
--
-- `decide` decides every row once, against the contacts as they are; `counts`, `skips`, `write`,
-- `events`, `gains` and `drops` read what it decided as :"plan_table". worker/import/merge/sql-files.ts splits the file
-- at the `-- name:` lines and puts the sections together in one of two ways:
-- - on one PostgreSQL, as ONE statement: `decide` a materialized CTE named plan, the writes CTEs
--   reading it, `counts` the main query. Nothing is written twice: a plan table cost each row an
--   insert, its key, three reads by key range and a delete, and the vacuums after
--   (bench/findings/2026-11-27-merge-batch-one-statement.md).
-- - on a Citus cluster, as statements run in this order in the batch's transaction, each only when
--   needed (worker/import/merge/batch.ts): `decide` into the part's plan table, then the others, then
--   `clear`. Each is a plain INSERT … SELECT or DELETE that names the account on every table, so
--   each runs whole on the node of the account's shards (Citus routes no statement that has an
--   INSERT in a WITH clause).
--
-- Nothing else writes these contacts meanwhile: single contact writes were drained and are refused
-- while the bulk_operations row exists, other imports of the account wait for this one's merge, and
-- the other batch in flight of this import covers a disjoint seq range, i.e. a disjoint email_md5
-- range (seq follows email_md5 order).
--
-- :"merge_table" is replaced by the name of one part of the import's merge table (hex only) when
-- the file is loaded, :"plan_table" by that part's plan table (or the CTE), :"rejects_table" by the
-- import's rejected rows (worker/import/staging.ts); seqs here are the part's own. A batch that
-- spans two parts runs these once per part, in its one transaction.

-- name: decide
-- $1 account id   $2 last seq of the part already merged   $3 last seq of this batch
-- $4 strategy     $5 overwrite brands (only with overwrite)  $6 restore disabled
-- $7 whether a seed of the account lies in the batch's key range (batch-clash.sql): without one,
--    no probe of seeds per row
-- Its columns are the plan table's (worker/import/staging.ts: ensurePlanTable), in its order.
--
-- The contact and the seed of each staged row are looked up through their primary keys, one probe
-- per row: LATERAL … OFFSET 0 is never flattened into a join, so the planner cannot pick another
-- shape. That is deliberate. As a plain join, statistics of `contacts` that predate the account
-- make the planner expect ONE contact for it and materialize all of the account's contacts once,
-- then filter them for every staged row (quadratic: 10,000 rows against 10,000 contacts took 7 s,
-- a 1M-row import did not finish); with fresh statistics it would rather hash the whole account.
-- A merge that changes nothing is a skip, and the row is not rewritten. Re-enabling is a change.
-- jsonb equality ignores key order; brand arrays compare in order, as single writes do. Only what
-- the statements after this one read is kept: the old attributes alone are a quarter of a row.
-- What the contact becomes (nothing for a skip, which writes nothing):
select o.account_id, o.seq, o.row_no, o.email_md5, o.email,
       case o.outcome when 'add' then o.attributes when 'update' then o.new_attributes end as attributes,
       case o.outcome when 'add' then o.brand_ids when 'update' then o.new_brand_ids end as brand_ids,
       -- The brands the row newly assigns, for its events: all of a new contact's, and for an updated
       -- one those it did not have before. Whether the sent brands were added or replaced the set,
       -- those are exactly the sent brands the contact lacked (a replaced set can also drop some).
       case o.outcome
         when 'add' then o.brand_ids
         when 'update' then coalesce(o.lacked_brand_ids, '{}')
         else '{}'
       end as assigned_brand_ids,
       o.reason as skip_reason, o.outcome,
       -- What an update changes in the contact tallies (`drops`, `counts`): the brands it drops (only
       -- a replaced set drops any; null when none), and whether it enables a disabled contact.
       case when o.outcome = 'update' and not o.old_brand_ids <@ o.new_brand_ids then
         array(select x.id from unnest(o.old_brand_ids) as x(id) where x.id <> all (o.new_brand_ids))
       end as dropped_brand_ids,
       o.outcome = 'update' and not o.enabled as reenabled
from (
select m.*, coalesce(m.skip_reason, 'unchanged') as reason,
  case
    when m.action <> 'merge' then m.action
    when not m.enabled
      or m.new_attributes <> m.old_attributes
      or m.new_brand_ids <> m.old_brand_ids then 'update'
    else 'skip'
  end as outcome
from (
  -- What the row does, and what an existing contact would become. An empty cell was never staged,
  -- so `attributes` holds only the values sent and "not sent" never clears anything.
    select b.*,
      case
        when b.seed then 'skip'                                  -- seeds are never imported into
        when not b.found then 'add'
        when not b.enabled and not $6::bool then 'skip'          -- a disabled contact stays disabled
        when b.enabled and $4::text = 'skip' then 'skip'         -- skip leaves an enabled contact as is
        else 'merge'
      end as action,
      -- The report's reason for each 'skip' above, in the same order (src/imports/rejections.ts).
      case
        when b.seed then 'seed_address'
        when not b.found then null
        when not b.enabled and not $6::bool then 'disabled_contact'
        when b.enabled and $4::text = 'skip' then 'existing_contact'
      end as skip_reason,
      case $4::text
        -- Sent values win. A row that sends every attribute of the schema replaces them all: the
        -- contact can hold no key outside the schema (every write is checked against it, and an
        -- attribute is never removed from it), so `old || sent` would be `sent` again, and that jsonb
        -- merge is the dearest expression of an update (a third of a 100,000-row batch of them).
        -- The schema cannot grow meanwhile: `attribute create` waits for the account lock this
        -- batch holds shared. An import never declares a column twice (resolveColumns), so the
        -- row's attribute_count counts distinct keys. The schema's count is one index probe per
        -- statement (an InitPlan).
        when 'overwrite' then
          case when b.attribute_count = (select count(*) from schema_attributes a where a.account_id = $1::uuid)
               then b.attributes
               else b.old_attributes || b.attributes
          end
        when 'keep' then b.attributes || b.old_attributes        -- only blanks are filled
        else b.attributes                                        -- skip restoring: only what was sent
      end as new_attributes,
      case
        when not b.found then null                               -- an added row keeps its own brands
        -- No brand sent: nothing to add, and nothing to replace with.
        when cardinality(b.brand_ids) = 0 then b.old_brand_ids
        -- Replaced: overwrite with overwriteBrands, or skip restoring a disabled contact.
        when $4::text = 'skip' or ($4::text = 'overwrite' and $5::bool) then b.brand_ids
        -- Nothing new among the brands sent (the usual re-import): the existing ones, as they are.
        when b.lacked_brand_ids is null then b.old_brand_ids
        -- Added: existing brands first, then the new ones in the row's order.
        else b.old_brand_ids || b.lacked_brand_ids
      end as new_brand_ids
  from (
    -- The contact's own address when it exists (the events carry it; `write` inserts it for an add
    -- only, and an update keeps the stored one): a row may spell it in other case.
    select r.account_id, r.seq, r.email_md5, r.row_no, coalesce(c.email, r.email) as email, r.attributes,
           r.brand_ids, r.attribute_count,
           c.found is not null as found,
           c.enabled,
           c.attributes as old_attributes,
           c.brand_ids as old_brand_ids,
           -- The brands sent that the contact lacks, in the row's order (null when it lacks none, the
           -- usual re-import, without an unnest): both what an added set appends and what the row
           -- newly assigns, computed once. (WITH ORDINALITY's order needs no sort: the plan has none.)
           case when cardinality(r.brand_ids) > 0 and not r.brand_ids <@ c.brand_ids then
             array(select x.id from unnest(r.brand_ids) with ordinality as x(id, n)
                   where x.id <> all (c.brand_ids) order by x.n)
           end as lacked_brand_ids,
           s.seed is not null as seed
    from :"merge_table" r
    left join lateral (
      select true as found, c.email, c.enabled, c.attributes, c.brand_ids
      from contacts c
      where c.account_id = $1::uuid and c.email_md5 = r.email_md5
      offset 0
    ) c on true
    left join lateral (
      select true as seed
      from seed_addresses s
      where $7::bool and s.account_id = $1::uuid and s.email_md5 = r.email_md5
      offset 0
    ) s on true
    where r.account_id = $1::uuid and r.seq > $2::int8 and r.seq <= $3::int8
    -- Its own subquery too, or lacked_brand_ids would be computed again at each use above.
    offset 0
  ) b
  -- Keeps this a subquery of its own: flattened into the outer select, new_attributes and
  -- new_brand_ids would be computed twice per row (once for the column, once for the outcome).
  offset 0
) m
offset 0
) o;

-- name: skips
-- The skipped rows, for the report: committed with the batch, so each is recorded exactly once.
-- Run only when the import records them (worker/import/rejects.ts).
-- $1 account id   $2 last seq of the part already merged   $3 last seq of this batch
insert into :"rejects_table" (account_id, row_no, reason)
select p.account_id, p.row_no, p.skip_reason
from :"plan_table" p
where p.account_id = $1::uuid and p.seq > $2::int8 and p.seq <= $3::int8 and p.outcome = 'skip';

-- name: write
-- Adds and updates in one INSERT … ON CONFLICT: an update finds its contact again through the
-- primary key, in the conflict check, and the planner has no join to choose. An UPDATE … FROM the
-- plan could go wrong on statistics of `contacts` that predate the account (expecting ONE contact
-- of the account, it puts the contacts on the outer side of a nested loop), and one addressed by
-- ctid, without the account, Citus cannot route. An 'add' never meets a conflict (see the top).
-- updated_at comes from the row: Citus refuses a function that is not immutable in DO UPDATE SET.
-- $1 account id   $2 last seq of the part already merged   $3 last seq of this batch
-- $4 import id    $5 import method (api | manual)
insert into contacts as c (account_id, email_md5, email, attributes, brand_ids,
                           first_source, first_import_id, first_import_method, updated_at)
select p.account_id, p.email_md5, p.email, p.attributes, p.brand_ids, 'import', $4::uuid, $5::text, now()
from :"plan_table" p
where p.account_id = $1::uuid and p.seq > $2::int8 and p.seq <= $3::int8 and p.outcome in ('add', 'update')
on conflict (account_id, email_md5) do update
  set attributes = excluded.attributes, brand_ids = excluded.brand_ids, enabled = true,
      updated_at = excluded.updated_at;

-- name: events
-- One event per brand newly assigned to a contact (the plan's assigned_brand_ids), stored as one
-- outbox row per brand with the set of the batch's contacts that got it; the caller adds up the
-- sets' sizes, the (contact, brand) events, and takes them as the brands each row assigns for the
-- contact tallies (`gains`). Run only when the import publishes events.
-- $1 account id   $2 last seq of the part already merged   $3 last seq of this batch   $4 import id
insert into brand_subscribe_events (account_id, brand_id, email_md5s, emails, source, import_id)
select p.account_id, x.id, array_agg(p.email_md5 order by p.email_md5), array_agg(p.email order by p.email_md5),
       'import', $4::uuid
from :"plan_table" p
cross join lateral unnest(p.assigned_brand_ids) as x(id)
where p.account_id = $1::uuid and p.seq > $2::int8 and p.seq <= $3::int8 and cardinality(p.assigned_brand_ids) > 0
group by p.account_id, x.id
returning brand_id, cardinality(email_md5s) as n;

-- name: gains
-- Each brand the batch's rows assign (all of an added contact's, those an updated one lacked) with
-- how many rows assign it: +1 each in the contact tallies (sql/migrations/0019_contact_tallies.sql;
-- worker/import/merge/batch.ts adds the totals from `counts`). The events' sets are the same
-- counts: run only when the import publishes none and the batch assigns brands.
-- $1 account id   $2 last seq of the part already merged   $3 last seq of this batch
select x.id as brand_id, count(*) as n
from :"plan_table" p
cross join lateral unnest(p.assigned_brand_ids) as x(id)
where p.account_id = $1::uuid and p.seq > $2::int8 and p.seq <= $3::int8 and cardinality(p.assigned_brand_ids) > 0
group by x.id;

-- name: drops
-- Each brand the batch's updates drop (a replaced set) with how many drop it: -1 each in the
-- contact tallies. Run only when some row drops one.
-- $1 account id   $2 last seq of the part already merged   $3 last seq of this batch
select x.id as brand_id, count(*) as n
from :"plan_table" p
cross join lateral unnest(p.dropped_brand_ids) as x(id)
where p.account_id = $1::uuid and p.seq > $2::int8 and p.seq <= $3::int8 and p.dropped_brand_ids is not null
group by x.id;

-- name: counts
-- The batch's counts. On a cluster it runs right after `decide`, and the statements after it run
-- only when there is something for them to do. `rows` is how many staged rows the plan read: fewer
-- than $3 - $2 means the (unlogged) staging lost rows in a crash.
-- $1 account id   $2 last seq of the part already merged   $3 last seq of this batch
select count(*)::int8 as rows,
       (count(*) filter (where outcome = 'add'))::int8 as added,
       (count(*) filter (where outcome = 'update'))::int8 as updated,
       (count(*) filter (where outcome = 'skip'))::int8 as skipped,
       (count(*) filter (where cardinality(assigned_brand_ids) > 0))::int8 as assigning,
       (count(*) filter (where reenabled))::int8 as reenabled,
       (count(*) filter (where dropped_brand_ids is not null))::int8 as dropping
from :"plan_table" p
where p.account_id = $1::uuid and p.seq > $2::int8 and p.seq <= $3::int8;

-- name: clear
-- The batch's plan rows, gone before it commits: the plan table holds rows only while batches run
-- (on a cluster; one PostgreSQL's plan is the statement's CTE).
-- $1 account id   $2 last seq of the part already merged   $3 last seq of this batch
delete from :"plan_table" p
where p.account_id = $1::uuid and p.seq > $2::int8 and p.seq <= $3::int8;

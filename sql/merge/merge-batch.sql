-- One merge batch of a contact import: the deduplicated staged rows with seq in ($3, $4] applied to
-- the account's contacts with exactly the semantics of a POST /v1/contacts row (spec, rules 3-6),
-- the brand-subscribe events written, and the batch's counts returned. advance.sql then moves the
-- import's checkpoint and counters in the same transaction, so the writes, the events and the
-- checkpoint commit together: a batch is applied exactly once however often the worker dies.
--
-- Nothing else writes these contacts meanwhile, so a plain INSERT cannot meet a concurrent one:
-- single contact writes were drained and are refused while the bulk_operations row exists, other
-- imports of the account wait for this one's merge, and the other batch in flight of this import
-- covers a disjoint seq range, i.e. a disjoint email_md5 range (seq follows email_md5 order).
-- `rows` is how many staged rows the batch read: fewer than $4 - $3 means the (unlogged) staging
-- lost rows in a crash.
--
-- :"merge_table" is replaced by the name of one part of the import's merge table (hex only) when
-- the file is loaded; seqs here are the part's own (worker/import/staging.ts). A batch that spans
-- two parts runs this once per part, in its one transaction.
--
-- $1  account id             $2  import id             $3  last seq of the part already merged
-- $4  last seq of this batch $5  strategy              $6  overwrite brands (only with overwrite)
-- $7  restore disabled       $8  publish events        $9  import method (api | manual)
-- $10 record skipped rows for the rejected-rows report into :"rejects_table" (worker/import/rejects.ts)
-- The contact and the seed of each staged row are looked up through their primary keys, one probe
-- per row: LATERAL … OFFSET 0 is never flattened into a join, so the planner cannot pick another
-- shape. That is deliberate. As a plain join, statistics of `contacts` that predate the account
-- make the planner expect ONE contact for it and materialize all of the account's contacts once,
-- then filter them for every staged row (quadratic: 10,000 rows against 10,000 contacts took 7 s,
-- a 1M-row import did not finish); with fresh statistics it would rather hash the whole account.
with batch as (
  select r.email_md5, r.row_no, r.email, r.attributes, r.brand_ids, r.attribute_count,
         c.found is not null as found,
         c.enabled,
         c.attributes as old_attributes,
         c.brand_ids as old_brand_ids,
         s.seed is not null as seed
  from :"merge_table" r
  left join lateral (
    select true as found, c.enabled, c.attributes, c.brand_ids
    from contacts c
    where c.account_id = $1::uuid and c.email_md5 = r.email_md5
    offset 0
  ) c on true
  left join lateral (
    select true as seed
    from seed_addresses s
    where s.account_id = $1::uuid and s.email_md5 = r.email_md5
    offset 0
  ) s on true
  where r.account_id = $1::uuid and r.seq > $3::int8 and r.seq <= $4::int8
),

-- What the row does, and what an existing contact would become. An empty cell was never staged,
-- so `attributes` holds only the values sent and "not sent" never clears anything.
merged as (
  select b.*,
    case
      when b.seed then 'skip'                                  -- seeds are never imported into
      when not b.found then 'add'
      when not b.enabled and not $7::bool then 'skip'          -- a disabled contact stays disabled
      when b.enabled and $5::text = 'skip' then 'skip'         -- skip leaves an enabled contact as is
      else 'merge'
    end as action,
    -- The report's reason for each 'skip' above, in the same order (src/imports/rejections.ts).
    case
      when b.seed then 'seed_address'
      when not b.found then null
      when not b.enabled and not $7::bool then 'disabled_contact'
      when b.enabled and $5::text = 'skip' then 'existing_contact'
    end as skip_reason,
    case $5::text
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
      when $5::text = 'skip' or ($5::text = 'overwrite' and $6::bool) then b.brand_ids
      -- Nothing new among the brands sent (the usual re-import): the existing ones, as they are.
      when b.brand_ids <@ b.old_brand_ids then b.old_brand_ids
      -- Added: existing brands first, then the new ones in the row's order.
      else b.old_brand_ids || array(
        select x.id from unnest(b.brand_ids) with ordinality as x(id, n)
        where x.id <> all (b.old_brand_ids)
        order by x.n)
    end as new_brand_ids
  from batch b
  -- Keeps this a subquery of its own: flattened into `planned`, new_attributes and new_brand_ids
  -- would be computed twice per row (once for the column, once for `outcome`).
  offset 0
),

-- A merge that changes nothing is a skip, and the row is not rewritten. Re-enabling is a change.
-- jsonb equality ignores key order; brand arrays compare in order, as single writes do.
planned as (
  -- Only what the writes below read: this CTE is materialized, and the old attributes alone are
  -- a quarter of its width.
  select m.email_md5, m.row_no, m.email, m.attributes, m.brand_ids, m.old_brand_ids,
         m.new_attributes, m.new_brand_ids, coalesce(m.skip_reason, 'unchanged') as skip_reason,
    case
      when m.action <> 'merge' then m.action
      when not m.enabled
        or m.new_attributes <> m.old_attributes
        or m.new_brand_ids <> m.old_brand_ids then 'update'
      else 'skip'
    end as outcome
  from merged m
),

-- The skipped rows, for the report: committed with the batch, so each is recorded exactly once.
skips as (
  insert into :"rejects_table" (account_id, row_no, reason)
  select $1::uuid, p.row_no, p.skip_reason
  from planned p
  where $10::bool and p.outcome = 'skip'
  returning 1
),

-- Adds and updates in one INSERT … ON CONFLICT: an update finds its contact again through the
-- primary key, in the conflict check, and the planner has no join to choose. An UPDATE … FROM
-- `planned` could go wrong on statistics of `contacts` that predate the account (they make it
-- expect ONE contact of the account and put the contacts on the outer side of a nested loop,
-- rescanning `planned` once per contact), and addressed by ctid instead, without the account,
-- Citus cannot route it to the node of the account's shards. Nothing else writes these contacts
-- meanwhile (see the top), so an 'add' never meets a conflict and an 'update' always does:
-- `xmax = 0` tells the new rows (no updater yet) from the updated ones, and the counts follow.
written as (
  insert into contacts as c (account_id, email_md5, email, attributes, brand_ids,
                             first_source, first_import_id, first_import_method, updated_at)
  select $1::uuid, p.email_md5, p.email,
         case when p.outcome = 'add' then p.attributes else p.new_attributes end,
         case when p.outcome = 'add' then p.brand_ids else p.new_brand_ids end,
         'import', $2::uuid, $9::text, now()
  from planned p
  where p.outcome in ('add', 'update')
  -- updated_at from the row: Citus refuses a function that is not immutable in DO UPDATE SET.
  on conflict (account_id, email_md5) do update
    set attributes = excluded.attributes, brand_ids = excluded.brand_ids, enabled = true,
        updated_at = excluded.updated_at
  returning c.xmax = 0 as added
),

-- One event per brand newly assigned to a contact: all of a new contact's brands, and for an
-- updated one the brands it did not have before (a replaced set can add some and drop others).
-- Stored as one outbox row per brand with the set of the batch's contacts that got it (migration
-- 0007); `events` below counts the (contact, brand) events, the sum of the sets' sizes.
events as (
  insert into brand_subscribe_events (account_id, brand_id, email_md5s, source, import_id)
  select $1::uuid, x.id, array_agg(p.email_md5 order by p.email_md5), 'import', $2::uuid
  from planned p
  cross join lateral unnest(case when p.outcome = 'add' then p.brand_ids else p.new_brand_ids end) as x(id)
  where $8::bool
    -- An update that kept the brand set as it was (the usual re-import) assigns none: filtered
    -- here, before the brand arrays of every updated row are unnested for nothing.
    and (p.outcome = 'add' or (p.outcome = 'update' and p.new_brand_ids <> p.old_brand_ids))
    and (p.outcome = 'add' or x.id <> all (p.old_brand_ids))
  group by x.id
  returning cardinality(email_md5s) as n
)

select p.rows, p.skipped,
       (select count(*) filter (where added) from written)::int8 as added,
       (select count(*) filter (where not added) from written)::int8 as updated,
       (select coalesce(sum(n), 0) from events)::int8 as events
from (select count(*)::int8 as rows, (count(*) filter (where outcome = 'skip'))::int8 as skipped from planned) p

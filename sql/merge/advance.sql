-- The last step of one merge batch (advanceMerge in src/imports/lifecycle.ts, called by
-- worker/import/merge/batch.ts): the import's checkpoint, counters and percentage move past the
-- batch, in the batch's transaction, after its contacts and events. Only from exactly the batch's
-- first seq: a batch whose predecessor has not committed (it rolled back, or someone else moved the
-- checkpoint) updates nothing here, and its caller rolls it back.
--
-- Counters are `x = x + n`: two batches run at once, and the later one runs this only once the
-- earlier one's transaction has ended (the caller waits for it), so it adds to the committed row.
-- This statement is also where a batch first locks a row shared with the other batch in flight
-- (contact_imports, then bulk_operations, in that order for both), so they cannot deadlock on rows.
--
-- $1 account id   $2 import id   $3 last seq already merged (this batch's first seq - 1)
-- $4 last seq of this batch   $5 added   $6 updated   $7 skipped   $8 row count
-- $9 estimated end of the whole merge
with advanced as (
  update contact_imports
  set checkpoint       = $4::int8,
      added_count      = added_count + $5::int8,
      updated_count    = updated_count + $6::int8,
      skipped_count    = skipped_count + $7::int8,
      -- Whole percent of rows accounted for: 0 until the first batch of a small file is done.
      percent_complete = (100 * $4::int8 / greatest($8::int8, 1))::int4,
      updated_at       = now()
  where account_id = $1::uuid and id = $2::uuid
    and status = 'importing' and phase = 'merge' and checkpoint = $3::int8
  returning percent_complete
),

-- Keeps Retry-After of refused single writes honest while the merge runs.
estimate as (
  update bulk_operations set estimated_end = $9::timestamptz
  where account_id = $1::uuid and id = $2::uuid and exists (select 1 from advanced)
)

select percent_complete as "percentComplete" from advanced

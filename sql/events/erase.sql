-- Erased contacts leave the account's recorded brand-subscribe events: in every set that holds one
-- of them, its md5 and its address become null at the same place of both arrays, so that every
-- cursor and every webhook batch in flight keeps its place and the feed and the relay skip it
-- (sql/events/page.sql). A set with none of them is not written.
-- Which sets can hold a contact: those written between its creation and its last write (a brand
-- is assigned only by a write, which moves updated_at, and the set is written in the same
-- transaction), give or take the margin the caller adds for clocks of different nodes. Only those
-- are read: a contact of an old import costs an index probe, not a scan of the retained events.
-- No GIN index on email_md5s: every import would pay for it on every set.
-- In the erasure's transaction, after the contacts' rows are deleted: a write that held one of
-- them had committed before the DELETE got its lock, so its set is visible here; a write after the
-- DELETE makes a new contact, whose events are not erased.
-- The new arrays are made from the row being updated, not from the statement's snapshot: a
-- concurrent erasure in the same set commits first, and this one then starts from its nulls
-- instead of writing them back. Erased md5s are matched through a hash join, not `= any`, which
-- compares every element with every erased md5 (10,000 × 1,000 for a merge batch's set).
-- $1 account id   $2 the erased contacts' email_md5s   $3 $4 the starts and ends of the ranges of
-- created_at to read, apart from each other (one per contact, overlapping ones merged)
update brand_subscribe_events e
set (email_md5s, emails) = (
  select array_agg(case when d.md5 is null then u.md5 end order by u.n),
         array_agg(case when d.md5 is null then u.email end order by u.n)
  from unnest(e.email_md5s, e.emails) with ordinality as u(md5, email, n)
  left join (select distinct md5 from unnest($2::uuid[]) as d(md5)) d on d.md5 = u.md5)
where e.account_id = $1::uuid and e.id in (
  select s.id
  from brand_subscribe_events s
  cross join lateral unnest(s.email_md5s) as u(md5)
  join unnest($2::uuid[]) as d(md5) on d.md5 = u.md5
  join unnest($3::timestamptz[], $4::timestamptz[]) as w(since, until)
    on s.created_at between w.since and w.until
  where s.account_id = $1::uuid)

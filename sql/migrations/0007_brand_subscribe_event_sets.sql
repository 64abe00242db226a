-- The brand-subscribe outbox stores SETS: one row is one brand newly assigned to a set of contacts
-- by one write (an API write: one contact; an import merge batch: every contact of the batch that
-- got the brand). One row per (contact, brand) cost a 1M-row import 1.18M outbox rows and about
-- 4 s of PostgreSQL CPU (select/unnest 1.0 s, heap 1.4 s, primary key index 1.2 s, identity
-- 0.4 s), some 40% of the merge of a fresh account; as sets it is one row per brand per batch.
--
-- The events are the same (contact, brand) pairs as before. A consumer reads them one per contact
-- with unnest:
--   select e.id, e.account_id, e.brand_id, m.email_md5, e.source, e.import_id, e.created_at
--   from brand_subscribe_events e cross join lateral unnest(e.email_md5s) as m(email_md5)
-- Existing rows become one-element sets.
alter table brand_subscribe_events add column email_md5s uuid[];
update brand_subscribe_events set email_md5s = array[email_md5];
alter table brand_subscribe_events alter column email_md5s set not null;
alter table brand_subscribe_events
  add constraint brand_subscribe_events_email_md5s_check check (cardinality(email_md5s) >= 1);
alter table brand_subscribe_events drop column email_md5;

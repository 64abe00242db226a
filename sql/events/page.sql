-- One page of an account's feed: the events after a cursor, in feed order (position, then md5
-- within the set), each as its JSON text. The page is cut before the contacts are read, so a page
-- of 1,000 looks up 1,000 contacts whatever the size of the sets around it. An event whose contact
-- is gone (erased) comes back with a null event: it still moves the cursor, and is never shown.
-- $1 account id   $2 $3 the cursor (position, md5)   $4 the page's size
-- $5 $6 the last event the page may hold (the batch a webhook resends), or null for no bound
with page as materialized (
  select s.position, m.md5, s.id, s.brand_id, s.source, s.import_id, s.created_at
  from brand_subscribe_events s
  cross join lateral unnest(s.email_md5s) as m(md5)
  where s.account_id = $1::uuid
    and s.position >= $2::int8 and (s.position > $2::int8 or m.md5 > $3::uuid)
    and ($5::int8 is null or s.position < $5::int8 or (s.position = $5::int8 and m.md5 <= $6::uuid))
  order by s.position, m.md5
  limit $4::int
)
select p.position, p.md5::text as md5,
  case when c.email is not null then json_build_object(
    'id', 'evt_' || p.id || '_' || replace(p.md5::text, '-', ''),
    'type', 'contact.brand_subscribed',
    'occurredAt', to_char(p.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'data', json_build_object(
      'email', c.email,
      'emailMd5', replace(p.md5::text, '-', ''),
      'brandId', p.brand_id,
      'source', case p.source
        when 'import' then json_build_object('type', 'import', 'importId', p.import_id)
        else json_build_object('type', 'api') end))::text
  end as event
from page p
left join contacts c on c.account_id = $1::uuid and c.email_md5 = p.md5
order by p.position, p.md5;

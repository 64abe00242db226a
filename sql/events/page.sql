-- One page of an account's feed: the events after a cursor, in feed order (position, then place in
-- the set's array), as one text of comma-separated JSON events, with the last place the page passed.
-- The sets it needs are found from their sizes (at most one more than the page's size, since no set
-- is empty), and of each only the slice the page returns is read and unnested: a page costs the
-- same wherever it starts in a set of 20,000. The addresses come with the set: no contact is read.
-- An erased event (a null in both arrays) is left out, and still moves the cursor. The JSON is
-- spelled out as text: what is the same for a whole set is made once per set (in `needed`,
-- materialized so that it is not made again for every event); json_build_object and to_char per
-- event took half the page's time, reading each event's contact 40 %.
-- $1 account id   $2 $3 the cursor: events of position $2 from place $3 + 1 on, and later positions
-- $4 the page's size   $5 $6 the last event the page may hold (a resent webhook batch), or nulls
with candidates as (
  select e.position, e.id, e.brand_id, e.source, e.import_id, e.created_at, e.email_md5s, e.emails, e.size,
    case when e.position = $2::int8 then least($3::int, e.size) else 0 end as skip,
    case when e.position = $5::int8 then least($6::int, e.size) else e.size end as upto
  from brand_subscribe_events e
  where e.account_id = $1::uuid and e.position >= $2::int8 and ($5::int8 is null or e.position <= $5::int8)
  order by e.position
  limit $4::int + 1
), sets as (
  select c.*, coalesce(sum(greatest(c.upto - c.skip, 0)) over (
    order by c.position rows between unbounded preceding and 1 preceding), 0) as ahead
  from candidates c
), needed as materialized (
  select s.position, s.size, s.skip, s.upto, s.ahead, s.email_md5s, s.emails,
    '{"id":"evt_' || s.id || '_' as head,
    '","type":"contact.brand_subscribed","occurredAt":"'
      || to_char(s.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
      || '","data":{"email":' as middle,
    '","brandId":"' || s.brand_id || '","source":'
      || case s.source when 'import' then '{"type":"import","importId":"' || s.import_id || '"}'
         else '{"type":"api"}' end
      || '}}' as tail
  from sets s
  where s.ahead < $4::int and s.upto > s.skip
), page as materialized (
  select n.position, n.skip + u.o as place, n.size, u.md5, u.email, n.head, n.middle, n.tail
  from needed n
  cross join lateral unnest(n.email_md5s[n.skip + 1 : least(n.upto, n.skip + $4::int - n.ahead)],
                            n.emails[n.skip + 1 : least(n.upto, n.skip + $4::int - n.ahead)])
    with ordinality as u(md5, email, o)
), shown as (
  select p.position, p.place,
    p.head || h.hex || p.middle || to_json(p.email)::text || ',"emailMd5":"' || h.hex || p.tail as event
  from page p
  cross join lateral (select encode(uuid_send(p.md5), 'hex') as hex) h
  where p.md5 is not null and p.email is not null
)
select l.position, l.place, l.size,
  (select string_agg(event, ',' order by position, place) from shown) as events,
  (select count(*)::int from shown) as shown
from (select position, place, size from page order by position desc, place desc limit 1) l;

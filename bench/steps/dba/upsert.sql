-- Step `dba`: what a skilled engineer would run by hand in psql after
--   copy dba_rows (email, brand, first_name, …, interests) from stdin with (format csv, header)
-- into an UNLOGGED table of text columns (bench/dba.ts). One statement gives the account's contacts
-- the end state import A gives them: the last row of each email (trimmed, lowercased md5 as the
-- key), its attributes as typed jsonb (strings, numbers, booleans, `;` lists as arrays; an empty cell
-- is not sent), its brands as ids (names in any case). Rows a cast would reject, and the few checks a
-- DBA adds to keep bad rows out (an address with one @, a string over 255 characters, a brand the
-- account does not have), are filtered with WHERE. The same statement loads file B over file A's
-- contacts: ON CONFLICT … DO UPDATE overwrites the attributes the file sends and adds its brands.
-- Not done, unlike the import: subscribe events, seeds, suppressions, disabled contacts, the report's
-- counts. Done after it in the same transaction, as the import keeps them: the account's contact
-- tallies (recount-tallies.sql; the transaction sets contact_tallies.explicit, bench/steps/dba.ts).
--
-- $1 account id
with brand_map as materialized (
  select jsonb_object_agg(lower(name), id) as m from brands where account_id = $1::uuid and deleted_at is null
),
typed as (
  select r.row_no,
         md5(lower(btrim(r.email)))::uuid as email_md5,
         btrim(r.email) as email,
         jsonb_strip_nulls(jsonb_build_object(
           'first_name', nullif(btrim(r.first_name), ''),
           'last_name',  nullif(btrim(r.last_name), ''),
           'company',    nullif(btrim(r.company), ''),
           'city',       nullif(btrim(r.city), ''),
           'alt_email',  nullif(btrim(r.alt_email), ''),
           'age',        nullif(btrim(r.age), '')::numeric,
           'score',      nullif(btrim(r.score), '')::numeric,
           'vip',        nullif(btrim(r.vip), '')::boolean,
           'opted_in',   nullif(btrim(r.opted_in), '')::boolean,
           'tags',       to_jsonb(string_to_array(nullif(btrim(r.tags), ''), ';')),
           'interests',  to_jsonb(string_to_array(nullif(btrim(r.interests), ''), ';'))
         )) as attributes,
         b.ids as brand_ids
  from dba_rows r
  cross join brand_map
  cross join lateral (
    select coalesce(array_agg((brand_map.m ->> lower(btrim(n)))::uuid), '{}') as ids
    from unnest(string_to_array(nullif(btrim(r.brand), ''), ';')) as n
  ) b
  where btrim(r.email) ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$'
    and length(r.first_name) <= 255 and length(r.last_name) <= 255
    and length(r.company) <= 255 and length(r.city) <= 255 and length(r.alt_email) <= 255
    and btrim(r.age) ~ '^(-?[0-9]+(\.[0-9]+)?)?$'
    and btrim(r.score) ~ '^(-?[0-9]+(\.[0-9]+)?)?$'
    and lower(btrim(r.vip)) in ('', 'true', 'false', 'yes', 'no', '1', '0')
    and lower(btrim(r.opted_in)) in ('', 'true', 'false', 'yes', 'no', '1', '0')
    and array_position(b.ids, null) is null -- a brand name the account does not have
)
insert into contacts as c (account_id, email_md5, email, attributes, brand_ids, first_source)
select distinct on (email_md5) $1::uuid, email_md5, email, attributes, brand_ids, 'import'
from typed
order by email_md5, row_no desc
on conflict (account_id, email_md5) do update
  set email      = excluded.email,
      attributes = c.attributes || excluded.attributes,
      brand_ids  = array(select distinct unnest(c.brand_ids || excluded.brand_ids)),
      updated_at = now()

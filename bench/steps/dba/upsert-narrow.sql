-- Step `dba` for the narrow shape (bench/narrow.ts): upsert.sql's statement for a file of
--   copy dba_rows (email, nickname, backup_email, visits, active, labels) from stdin with (format csv, header)
-- with the same semantics: the last row of each email (trimmed, lowercased md5 as the key: the
-- shape's capitals and upper-case repeats are one contact), its attributes as typed jsonb (strings,
-- numbers, booleans in any spelling the cast reads, `;` lists as arrays; an empty cell is not sent).
-- Rows a cast would reject, and the checks a DBA adds to keep bad rows out (an address with one @,
-- for the identity and the email attribute alike; a string over 255 characters), are filtered with
-- WHERE. No Brand column: the contacts keep the brands they have. The same statement loads file B
-- over file A's contacts: ON CONFLICT … DO UPDATE overwrites the attributes the file sends.
-- Not done, unlike the import: subscribe events, seeds, suppressions, disabled contacts, the report's
-- counts. Done after it in the same transaction, as the import keeps them: the account's contact
-- tallies (recount-tallies.sql; the transaction sets contact_tallies.explicit, bench/steps/dba.ts).
--
-- $1 account id
with typed as (
  select r.row_no,
         md5(lower(btrim(r.email)))::uuid as email_md5,
         btrim(r.email) as email,
         jsonb_strip_nulls(jsonb_build_object(
           'nickname',     nullif(btrim(r.nickname), ''),
           'backup_email', nullif(btrim(r.backup_email), ''),
           'visits',       nullif(btrim(r.visits), '')::numeric,
           'active',       nullif(btrim(r.active), '')::boolean,
           'labels',       to_jsonb(string_to_array(nullif(btrim(r.labels), ''), ';'))
         )) as attributes
  from dba_rows r
  where btrim(r.email) ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$'
    and length(r.nickname) <= 255 and length(r.backup_email) <= 255
    and btrim(r.backup_email) ~ '^([^@\s]+@[^@\s]+\.[^@\s]+)?$'
    and btrim(r.visits) ~ '^(-?[0-9]+(\.[0-9]+)?)?$'
    and lower(btrim(r.active)) in ('', 'true', 'false', 'yes', 'no', '1', '0')
)
insert into contacts as c (account_id, email_md5, email, attributes, first_source)
select distinct on (email_md5) $1::uuid, email_md5, email, attributes, 'import'
from typed
order by email_md5, row_no desc
on conflict (account_id, email_md5) do update
  set email      = excluded.email,
      attributes = c.attributes || excluded.attributes,
      updated_at = now()

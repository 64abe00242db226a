-- Whether merge batch ($2, $3] of an import can take the fast path (insert-batch.sql): not when a
-- contact (`contacts`) or a seed (`seeds`) of account $1 has an email_md5 within the batch's key
-- range, i.e. between the md5 of the batch's first and last row (seq follows email_md5 order). A
-- batch that does meet contacts probes seeds only when `seeds` (merge-batch.sql, $7). Two range probes of primary
-- keys; the planner has no other sensible plan for them, whatever the statistics say.
-- :"merge_table" is one part of the import's merge table; $2 and $3 are seqs of that part.
select exists (
         select 1 from contacts c
         where c.account_id = $1::uuid
           and c.email_md5 >= (select email_md5 from :"merge_table" where account_id = $1::uuid and seq = $2::int8 + 1)
           and c.email_md5 <= (select email_md5 from :"merge_table" where account_id = $1::uuid and seq = $3::int8)
       ) as contacts,
       exists (
         select 1 from seed_addresses s
         where s.account_id = $1::uuid
           and s.email_md5 >= (select email_md5 from :"merge_table" where account_id = $1::uuid and seq = $2::int8 + 1)
           and s.email_md5 <= (select email_md5 from :"merge_table" where account_id = $1::uuid and seq = $3::int8)
       ) as seeds

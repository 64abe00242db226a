-- Rows the read phase staged, committed with the move to dedupe. The raw staging table is UNLOGGED
-- (fast COPY), so a PostgreSQL crash empties it; dedupe compares its row count with this figure and
-- sends the import back to the read phase instead of merging a wiped table as if the file were empty.
alter table contact_imports add column staged_count bigint;

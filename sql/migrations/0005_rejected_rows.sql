-- The rejected-rows report of a contact import, an extension beyond the contract
-- (GET /v1/contact-imports/{id}/rejected-rows; worker/import/report.ts).
--
-- rejects_recorded: the last read of the import recorded its rejected rows (REJECTED_ROWS_REPORT
-- was on for it); the merge then records its skipped rows and the finish writes the report. Decided
-- once per read, so a worker restarted with the other setting midway never makes half a report.
alter table contact_imports add column rejects_recorded boolean not null default false;

-- file_rows and file_linebreak: what the read phase saw of the file, so the report can find each
-- rejected row in it again by counting lines instead of parsing every row a second time. file_rows
-- counts every row the CSV parser gave: blank lines and the header included.
alter table contact_imports add column file_rows int8;
alter table contact_imports add column file_linebreak text;

-- The report, once written: its object key, its line count, and when the sweep removes it
-- (REJECTED_ROWS_RETENTION_DAYS after the import finished). NULL key: no report.
alter table contact_imports add column rejected_rows_key text;
alter table contact_imports add column rejected_rows_count int8;
alter table contact_imports add column rejected_rows_expires_at timestamptz;

-- The sweep's query for expired reports.
create index contact_imports_rejected_rows_expiry on contact_imports (rejected_rows_expires_at)
  where rejected_rows_key is not null;

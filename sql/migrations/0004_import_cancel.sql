-- POST /v1/contact-imports/{id}/cancel, an extension beyond the contract: a client may give up an
-- import that has no file yet, or whose file has not started importing, instead of leaving its
-- upload link to block the account's next import for 24 hours.
--
-- A cancelled import is `failed` (the contract's states are kept: `failed` is final, and it no longer
-- counts in the partial unique index contact_imports_one_open). This column tells a cancel from any
-- other failure durably, so a repeated cancel answers 200 (idempotent) while an import that failed
-- for another reason answers 409, and the difference does not rest on the wording of failure_reason.
alter table contact_imports add column cancelled_at timestamptz;

-- Only a failed import can have been cancelled. Every write of the status is guarded by the state
-- it comes from (src/imports/lifecycle.ts), and nothing leaves `failed`, so this never fires; it
-- states the rule where a hand-written UPDATE would meet it.
alter table contact_imports add constraint contact_imports_cancelled_is_failed
  check (cancelled_at is null or status = 'failed');

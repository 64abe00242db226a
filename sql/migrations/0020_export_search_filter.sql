-- A contact export may be filtered by the search language (src/search, docs/searching.md) beside the
-- brand_ids/enabled shorthand: the filter as the request sent it, null when none was. The worker
-- parses it again against the account's schema when it runs the export (worker/exports/run.ts).
-- json, not jsonb: the export shows the filter as it was sent, its keys in their order.
alter table contact_exports add column search_filter json;

-- When a running suppression import expects to finish: the Retry-After a second import on the
-- busy list gets (at least 1 second). Manual imports estimate it from the file size and refine it
-- once the file is read.
alter table suppression_imports add column estimated_end timestamptz;

-- The disabled contacts of each account in email_md5 order (docs/searching.md): a search or count
-- with {"enabled": false} reads them alone instead of every contact of the account. Partial: only a
-- disabled contact has an entry, so an import (whose new contacts are enabled) and a write of an
-- enabled contact add nothing to it, and an update that leaves `enabled` as it was stays HOT. On
-- Citus the index is made on every shard.
create index contacts_disabled on contacts (account_id, email_md5) where not enabled;

-- The indexer (#17), continued.

-- GetTokenBalances by account reads its page from this index alone (an index-only scan once the
-- table's pages are all-visible): every column the answer needs is in it. Balance updates were not
-- HOT before (block_number is indexed), so carrying the balance here costs index size, not updates.
DROP INDEX indexer_balances_account;
CREATE INDEX indexer_balances_account ON indexer_balances (chain_id, account, contract, token_id)
  INCLUDE (balance, contract_type, block_number, block_hash);

-- A backfill of some contracts only (a contract added to a watchlist after the follower passed its
-- blocks): NULL reads what the scope reads.
ALTER TABLE indexer_backfills ADD COLUMN contracts TEXT[];

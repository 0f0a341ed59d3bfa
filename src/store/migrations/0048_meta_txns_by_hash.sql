-- The indexer names the meta-transaction a chain transaction carried (Transaction.metaTxnID) and filters
-- history by meta-transaction ids: both look meta_txns up by the hash that was mined.
CREATE INDEX meta_txns_txn_hash_idx ON meta_txns (chain_id, txn_hash) WHERE txn_hash IS NOT NULL;

-- The partial indexes that count a wallet's, a key's and an address's live meta-transactions at intake
-- (0010) were written for QUEUED and SENT; PENDING_PRECONDITION (0019) joined the live statuses, and a
-- predicate over three statuses does not imply one over two, so the planner could not use them and each
-- SendMetaTxn counted its key's rows by reading every row of the chain (about 2 500 buffers per send
-- after 1 000 meta-transactions, growing with the table). Same columns, over every live status.
DROP INDEX IF EXISTS meta_txns_live_ip_idx;
DROP INDEX IF EXISTS meta_txns_live_key_idx;
DROP INDEX IF EXISTS meta_txns_live_payer_idx;
CREATE INDEX meta_txns_live_ip_idx ON meta_txns (chain_id, client_ip) WHERE status IN ('PENDING_PRECONDITION', 'QUEUED', 'SENT');
CREATE INDEX meta_txns_live_key_idx ON meta_txns (chain_id, key_id) WHERE status IN ('PENDING_PRECONDITION', 'QUEUED', 'SENT');
CREATE INDEX meta_txns_live_payer_idx ON meta_txns (chain_id, fee_payer) WHERE status IN ('PENDING_PRECONDITION', 'QUEUED', 'SENT') AND fee_payer IS NOT NULL;

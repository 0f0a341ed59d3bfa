-- The dispatch engine: every broadcast attempt of a (sender, nonce) slot is kept, so a receipt for any
-- of them is the result; senders carry their balance floor state; meta-transactions know their slot.
ALTER TABLE relay_txs ADD COLUMN kind TEXT NOT NULL DEFAULT 'meta';      -- meta | batch | filler
ALTER TABLE relay_txs ADD COLUMN broadcast_block BIGINT;                 -- the head when this attempt was signed
ALTER TABLE relay_txs ADD COLUMN mined_block_hash TEXT;
ALTER TABLE relay_txs ADD COLUMN value NUMERIC(78, 0) NOT NULL DEFAULT 0;
ALTER TABLE relay_txs ADD COLUMN to_address TEXT;
ALTER TABLE relay_txs ADD COLUMN data TEXT;
CREATE INDEX relay_txs_open_idx ON relay_txs (chain_id, sender, nonce) WHERE status IN ('PENDING', 'MINED');

ALTER TABLE relay_senders ADD COLUMN balance NUMERIC(78, 0);
ALTER TABLE relay_senders ADD COLUMN below_floor BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE relay_senders ADD COLUMN chain_latest BIGINT;
ALTER TABLE relay_senders ADD COLUMN chain_pending BIGINT;
ALTER TABLE relay_senders ADD COLUMN stalled TEXT;                       -- why its lowest pending transaction cannot be replaced

ALTER TABLE meta_txns ADD COLUMN batch_index INTEGER;                    -- its call's index inside a guest-module batch
ALTER TABLE meta_txns ADD COLUMN stalled TEXT;                           -- e.g. the fee cap stops a replacement
ALTER TABLE meta_txns ADD COLUMN confirmed BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX meta_txns_slot_idx ON meta_txns (chain_id, sender, txn_nonce) WHERE status <> 'QUEUED';

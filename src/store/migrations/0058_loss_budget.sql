-- What a fee-paying meta-transaction whose fee is not final by construction can cost the relayer (its
-- worst case in wei; NULL for sponsored ones), and the client network (IPv4 /24, IPv6 /48 by default) it
-- came from: the loss budgets (relayer/loss-budget.ts, docs/relayer-worst-case.md) sum these.
ALTER TABLE meta_txns ADD COLUMN exposure_wei NUMERIC(78, 0);
ALTER TABLE meta_txns ADD COLUMN client_net TEXT;
-- Whether its fee is final by construction (intake/finality.ts): one that is not is signed within exposure_wei.
ALTER TABLE meta_txns ADD COLUMN fee_final BOOLEAN;
CREATE INDEX meta_txns_exposure_recent_idx ON meta_txns (chain_id, updated_at) WHERE exposure_wei IS NOT NULL;
CREATE INDEX meta_txns_exposure_live_idx ON meta_txns (chain_id) WHERE exposure_wei IS NOT NULL AND status IN ('QUEUED', 'SENT', 'PENDING_PRECONDITION');
-- "Has this caller had a fee arrive?": a client network under a key (NULL: keyless).
CREATE INDEX meta_txns_paid_net_idx ON meta_txns (chain_id, client_net, key_id) WHERE fee_value > 0 AND fee_received >= fee_value;

-- A fee that did not arrive bars the caller where it came from, not the whole dapp: (key, client network)
-- and (key, wallet); the key alone only after several networks (keyBarAfterNetworks).
ALTER TABLE relay_bars DROP CONSTRAINT relay_bars_kind_check;
ALTER TABLE relay_bars ADD CONSTRAINT relay_bars_kind_check CHECK (kind IN ('wallet', 'key', 'ip', 'contract', 'key-client', 'key-wallet'));

-- The relayer's worst case, priced before it signs and reconciled after inclusion (docs/relayer-worst-case.md).
-- gas_price_priced: the gas price intake priced the meta-transaction at; cover_wei: what its fee was worth
-- then (fee-paid), or what its sponsor was held for (sponsored), in wei; shortfall_wei: once mined, what
-- it cost beyond that cover (NULL: none, or mined before this was recorded).
ALTER TABLE meta_txns ADD COLUMN gas_price_priced NUMERIC(78, 0);
ALTER TABLE meta_txns ADD COLUMN cover_wei NUMERIC(78, 0);
ALTER TABLE meta_txns ADD COLUMN shortfall_wei NUMERIC(78, 0);
CREATE INDEX meta_txns_gas_shortfall_idx ON meta_txns (chain_id, mined_at DESC) WHERE shortfall_wei > 0;

-- A contract a meta-transaction that burnt more gas than it paid for called is barred too: the next
-- wallet that calls it pays its fee or is sponsored, it is not relayed on the relayer's credit.
ALTER TABLE relay_bars DROP CONSTRAINT relay_bars_kind_check;
ALTER TABLE relay_bars ADD CONSTRAINT relay_bars_kind_check CHECK (kind IN ('wallet', 'key', 'ip', 'contract'));

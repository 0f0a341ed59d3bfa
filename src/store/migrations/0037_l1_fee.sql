-- OP-stack chains charge the sender an L1 data fee on top of gasUsed × effectiveGasPrice (the receipt's
-- l1Fee, docs/relayer-l2.md). l1_fee_wei: once mined, the meta-transaction's share of it (NULL on a chain
-- without one); its cost, its debit and its sponsor's settled charge count it.
ALTER TABLE meta_txns ADD COLUMN l1_fee_wei NUMERIC(78, 0);

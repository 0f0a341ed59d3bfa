-- Who asked for a meta-transaction (the access key, the client's address), so the queue can be
-- limited per key and per address, and a fee that did not arrive can bar them from fee-paid relaying.
ALTER TABLE meta_txns ADD COLUMN key_id BIGINT;
ALTER TABLE meta_txns ADD COLUMN client_ip TEXT;
-- The wallet whose bundle pays the fee (fees are read from calldata: one paying wallet per meta-transaction).
ALTER TABLE meta_txns ADD COLUMN fee_payer TEXT;
-- What the payment address really received, read from the mined receipt (NULL until then, and when no fee was due).
ALTER TABLE meta_txns ADD COLUMN fee_received NUMERIC(78, 0);

CREATE INDEX meta_txns_live_ip_idx ON meta_txns (chain_id, client_ip) WHERE status IN ('QUEUED', 'SENT');
CREATE INDEX meta_txns_live_key_idx ON meta_txns (chain_id, key_id) WHERE status IN ('QUEUED', 'SENT');
CREATE INDEX meta_txns_live_payer_idx ON meta_txns (chain_id, fee_payer) WHERE status IN ('QUEUED', 'SENT') AND fee_payer IS NOT NULL;
CREATE INDEX meta_txns_shortfall_idx ON meta_txns (chain_id, mined_at DESC) WHERE fee_received < fee_value;

-- A wallet, access key or client address whose meta-transaction was mined without its fee arriving:
-- it may no longer have fee-paid meta-transactions relayed (sponsored ones still go: the sponsor pays).
CREATE TABLE relay_bars (
  kind         TEXT NOT NULL CHECK (kind IN ('wallet', 'key', 'ip')),
  value        TEXT NOT NULL,
  chain_id     BIGINT NOT NULL,
  meta_txn_id  TEXT NOT NULL,
  fee_token    TEXT,
  owed         NUMERIC(78, 0),
  received     NUMERIC(78, 0),
  created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (kind, value)
);

-- A sponsorship rule may cap the gas of one meta-transaction it covers (a CONTRACT rule pays for the
-- contract's callbacks into other contracts too; the ceiling bounds what one call can cost the sponsor).
ALTER TABLE gas_sponsors ADD COLUMN max_gas BIGINT;

-- Meta-transactions that wait for on-chain preconditions (SendMetaTxn.preconditions) in status
-- PENDING_PRECONDITION: what they wait for and until when. The row in meta_txns holds their nonces and
-- counts against their callers' share of the queue like any queued one.
CREATE TABLE meta_txn_waits (
  chain_id     BIGINT NOT NULL,
  meta_txn_id  TEXT NOT NULL,
  conditions   TEXT NOT NULL,          -- JSON: the normalised preconditions (amounts as decimal strings)
  deadline     TIMESTAMPTZ NOT NULL,   -- DROPPED when the preconditions have not held by then
  quote        TEXT,                   -- the fee quote sent with it, honoured if still valid when it runs
  accepted_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, meta_txn_id)
);
-- The per-block checker reads every waiting meta-transaction of a chain.
CREATE INDEX meta_txns_waiting_idx ON meta_txns (chain_id, queued_at) WHERE status = 'PENDING_PRECONDITION';

-- An operator's StopSender: the sender takes no new work until StartSender; its open slots still
-- settle (they hold nonces that must be mined or replaced).
ALTER TABLE relay_senders ADD COLUMN stopped_at TIMESTAMPTZ;

-- The relayer processes alive per chain, so each takes a fair share of the senders rather than the
-- first one holding them all.
CREATE TABLE relay_instances (
  chain_id    BIGINT NOT NULL,
  owner       TEXT NOT NULL,
  seen_until  TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (chain_id, owner)
);

-- A queued meta-transaction a relayer process is about to simulate and sign: the others leave it alone
-- until the claim runs out, so two processes do not both simulate the same queue. (Signing re-checks
-- the status under a row lock; the claim only saves the duplicate work.)
ALTER TABLE meta_txns ADD COLUMN claimed_by TEXT;
ALTER TABLE meta_txns ADD COLUMN claimed_until TIMESTAMPTZ;

-- Intake no longer takes one lock per chain around its insert (#19): a live wallet nonce is unique by
-- constraint, and only meta-transactions of the same wallets wait on each other (advisory lock per wallet).
-- meta_txn_bundles.live mirrors "its meta-transaction is live" (PENDING_PRECONDITION, QUEUED or SENT: store.ts
-- LIVE_STATUSES), kept by a trigger on the status.
ALTER TABLE meta_txn_bundles ADD COLUMN live BOOLEAN NOT NULL DEFAULT TRUE;

UPDATE meta_txn_bundles b SET live = (m.status IN ('PENDING_PRECONDITION', 'QUEUED', 'SENT'))
  FROM meta_txns m WHERE m.chain_id = b.chain_id AND m.id = b.meta_txn_id;

-- Should two live holders of one nonce exist from before, one keeps the constraint's slot.
UPDATE meta_txn_bundles b SET live = FALSE
 WHERE b.live AND EXISTS (
   SELECT 1 FROM meta_txn_bundles o
    WHERE o.live AND o.chain_id = b.chain_id AND o.wallet = b.wallet AND o.nonce_space = b.nonce_space AND o.nonce = b.nonce
      AND o.bundle_id < b.bundle_id);

CREATE UNIQUE INDEX meta_txn_bundles_live_nonce_uq ON meta_txn_bundles (chain_id, wallet, nonce_space, nonce) WHERE live;

-- Leaving the live statuses frees the nonces; coming back (a reorg) takes them again unless another live
-- meta-transaction took one meanwhile (the intake's holder check still sees the returning one by status).
CREATE FUNCTION meta_txn_bundles_follow_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status IN ('PENDING_PRECONDITION', 'QUEUED', 'SENT') THEN
    UPDATE meta_txn_bundles b SET live = TRUE
     WHERE b.chain_id = NEW.chain_id AND b.meta_txn_id = NEW.id AND NOT b.live
       AND NOT EXISTS (
         SELECT 1 FROM meta_txn_bundles o
          WHERE o.live AND o.chain_id = b.chain_id AND o.wallet = b.wallet AND o.nonce_space = b.nonce_space AND o.nonce = b.nonce);
  ELSE
    UPDATE meta_txn_bundles SET live = FALSE WHERE chain_id = NEW.chain_id AND meta_txn_id = NEW.id AND live;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER meta_txns_live_nonces AFTER UPDATE OF status ON meta_txns
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION meta_txn_bundles_follow_status();

-- When the sweep last read a sender's balance and nonces from the node: during an outage /ready and
-- the console show these reads as "last known" with their age (updated_at also moves with leases).
ALTER TABLE relay_senders ADD COLUMN read_at TIMESTAMPTZ;

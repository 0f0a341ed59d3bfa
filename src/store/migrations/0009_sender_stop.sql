-- An operator's StopSender: the sender takes no new work until StartSender; its open slots still
-- settle (they hold nonces that must be mined or replaced).
ALTER TABLE relay_senders ADD COLUMN stopped_at TIMESTAMPTZ;

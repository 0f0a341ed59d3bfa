-- Indexer webhook listeners (issue 34): Sequence's AddWebhookListener and its siblings. A listener is a
-- webhooks row of kind 'listener' (its URL, secret, enabled state, deliveries, retries and the one
-- delivery worker are those of any endpoint) and a row here: the chain it listens on and Sequence's
-- EventFilter. Console webhooks (kind 'webhook') and listeners never see each other's rows.
ALTER TABLE webhooks ADD COLUMN kind TEXT NOT NULL DEFAULT 'webhook';

CREATE TABLE indexer_listeners (
  webhook_id  BIGINT PRIMARY KEY REFERENCES webhooks(id),
  project_id  BIGINT NOT NULL REFERENCES projects(id),
  chain_id    BIGINT NOT NULL,
  -- {events, topics, contractAddresses, accounts, tokenIDs}: as given, addresses lower-cased, token ids
  -- decimal, `topics` the transfer topics `events` names (events/listener-filter.ts).
  filter      JSONB NOT NULL,
  -- Told of transfers in blocks above this one only (the confirmed head when it was added): a
  -- backfill of a contract's history, or a follower catching up, does not replay the past to it.
  from_block  BIGINT NOT NULL
);
CREATE INDEX indexer_listeners_chain_idx ON indexer_listeners (chain_id);
CREATE INDEX indexer_listeners_project_idx ON indexer_listeners (project_id, chain_id);

-- A reorg tells the listeners that were told of a log that it went: their events are found by block.
CREATE INDEX events_listener_logs_idx ON events (chain_id, ((payload->>'blockNumber')::bigint)) WHERE type = 'indexer.event_log';

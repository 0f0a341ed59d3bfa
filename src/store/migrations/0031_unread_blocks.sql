-- Blocks whose logs could not be read (issue 29): a block too big for any answer the node gives,
-- even read split by address, topic and receipt. After logReads.blockAttempts failed polls the
-- reader (the indexer's follower of a scope, or the metadata watcher) passes over it so later blocks
-- are not held up, and records it here: operators see it (console, metrics) and the reader tries it
-- again at next_retry_at, backing off, until it is read (resolved_at set).
CREATE TABLE unread_blocks (
  chain_id      BIGINT NOT NULL,
  -- 'indexer:all', 'indexer:watchlist' or 'watcher': each keeps its own cursor and reads its own logs.
  reader        TEXT NOT NULL,
  block_number  BIGINT NOT NULL,
  block_hash    TEXT NOT NULL,
  error         TEXT NOT NULL,
  -- Reads tried since it was passed over.
  retries       INTEGER NOT NULL DEFAULT 0,
  flagged_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  next_retry_at TIMESTAMPTZ NOT NULL,
  resolved_at   TIMESTAMPTZ,
  PRIMARY KEY (chain_id, reader, block_number)
);

CREATE INDEX unread_blocks_due ON unread_blocks (chain_id, reader, next_retry_at) WHERE resolved_at IS NULL;

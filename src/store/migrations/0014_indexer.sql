-- The indexer (#17): token transfers read from chain logs, the balances they add up to, the cursors
-- of the head followers and the backfill tasks that share old block ranges between workers.

-- One row per token moved by a log: an ERC20/ERC721 Transfer is one row, an ERC1155 TransferBatch
-- one row per id (part = its position). The key makes ingestion idempotent: a log read twice (a
-- backfill over a range the follower already read, a chunk retried after a crash) inserts nothing
-- and so changes no balance.
CREATE TABLE indexer_transfers (
  chain_id      INTEGER NOT NULL,
  block_number  BIGINT NOT NULL,
  log_index     INTEGER NOT NULL,
  part          INTEGER NOT NULL,
  block_hash    TEXT NOT NULL,
  tx_hash       TEXT NOT NULL,
  tx_index      INTEGER NOT NULL,
  contract      TEXT NOT NULL,
  contract_type TEXT NOT NULL,
  from_address  TEXT NOT NULL,
  to_address    TEXT NOT NULL,
  token_id      NUMERIC(78, 0) NOT NULL,
  amount        NUMERIC(78, 0) NOT NULL,
  ts            TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (chain_id, block_number, log_index, part)
);
-- History per account (either side) and per contract, newest first.
CREATE INDEX indexer_transfers_from ON indexer_transfers (chain_id, from_address, block_number DESC);
CREATE INDEX indexer_transfers_to ON indexer_transfers (chain_id, to_address, block_number DESC);
CREATE INDEX indexer_transfers_contract ON indexer_transfers (chain_id, contract, block_number DESC);
CREATE INDEX indexer_transfers_tx ON indexer_transfers (chain_id, tx_hash);

-- The running sum of transfers per (chain, contract, account, token id); ERC20 rows have token id 0.
-- The zero address is not an account: mints and burns move tokens from and to nowhere.
CREATE TABLE indexer_balances (
  chain_id      INTEGER NOT NULL,
  contract      TEXT NOT NULL,
  account       TEXT NOT NULL,
  token_id      NUMERIC(78, 0) NOT NULL,
  contract_type TEXT NOT NULL,
  balance       NUMERIC(78, 0) NOT NULL,
  block_number  BIGINT NOT NULL,
  block_hash    TEXT NOT NULL,
  PRIMARY KEY (chain_id, contract, account, token_id)
);
CREATE INDEX indexer_balances_account ON indexer_balances (chain_id, account, contract, token_id);
CREATE INDEX indexer_balances_updates ON indexer_balances (chain_id, contract, block_number);

-- Where each head follower stands, per (chain, scope); scope is 'all' or 'watchlist'.
CREATE TABLE indexer_cursors (
  chain_id     INTEGER NOT NULL,
  scope        TEXT NOT NULL,
  block_number BIGINT NOT NULL,
  block_hash   TEXT NOT NULL,
  malformed    BIGINT NOT NULL DEFAULT 0,
  updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, scope)
);

-- Hashes of recent blocks the follower read (those with transfers and each chunk's end): where a
-- reorg is traced back to the last block both forks share.
CREATE TABLE indexer_blocks (
  chain_id     INTEGER NOT NULL,
  block_number BIGINT NOT NULL,
  block_hash   TEXT NOT NULL,
  PRIMARY KEY (chain_id, block_number)
);

-- Contracts indexed on a chain whose scope is 'watchlist' (project_id NULL: from the config).
CREATE TABLE indexer_watchlist (
  chain_id   INTEGER NOT NULL,
  contract   TEXT NOT NULL,
  project_id INTEGER,
  added_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, contract)
);

-- A backfill: blocks [from_block, to_block] of a chain, cut into ranges that workers lease.
CREATE TABLE indexer_backfills (
  id          BIGSERIAL PRIMARY KEY,
  chain_id    INTEGER NOT NULL,
  scope       TEXT NOT NULL,
  from_block  BIGINT NOT NULL,
  to_block    BIGINT NOT NULL,
  status      TEXT NOT NULL DEFAULT 'RUNNING',
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  finished_at TIMESTAMPTZ
);

-- next_block is the range's own cursor: moved in the same transaction as the chunk it follows.
CREATE TABLE indexer_backfill_ranges (
  backfill_id BIGINT NOT NULL REFERENCES indexer_backfills (id) ON DELETE CASCADE,
  range_from  BIGINT NOT NULL,
  range_to    BIGINT NOT NULL,
  next_block  BIGINT NOT NULL,
  logs        BIGINT NOT NULL DEFAULT 0,
  malformed   BIGINT NOT NULL DEFAULT 0,
  lease_owner TEXT,
  lease_until TIMESTAMPTZ,
  PRIMARY KEY (backfill_id, range_from)
);
CREATE INDEX indexer_backfill_ranges_open ON indexer_backfill_ranges (backfill_id) WHERE next_block <= range_to;

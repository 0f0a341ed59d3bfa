-- Gas sponsorship: a project pays for bundles its rules cover, per chain.
CREATE TABLE gas_sponsors (
  id          BIGSERIAL PRIMARY KEY,
  project_id  BIGINT NOT NULL REFERENCES projects(id),
  chain_id    BIGINT NOT NULL,
  kind        TEXT NOT NULL,              -- ANY | WALLET | TOKEN | CONTRACT | ADDRESS
  address     TEXT NOT NULL,              -- lower case
  name        TEXT NOT NULL DEFAULT '',
  active      BOOLEAN NOT NULL DEFAULT true,
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  deleted_at  TIMESTAMPTZ
);
CREATE UNIQUE INDEX gas_sponsors_rule_idx ON gas_sponsors (project_id, chain_id, kind, address) WHERE deleted_at IS NULL;
CREATE INDEX gas_sponsors_lookup_idx ON gas_sponsors (chain_id, address) WHERE deleted_at IS NULL;

-- One row per accepted meta-transaction, written before SendMetaTxn answers.
CREATE TABLE meta_txns (
  chain_id        BIGINT NOT NULL,
  id              TEXT NOT NULL,          -- the top-level subdigest, 64 hex, no 0x
  project_id      BIGINT REFERENCES projects(id),
  wallet          TEXT NOT NULL,
  entrypoint      TEXT NOT NULL,
  input           TEXT NOT NULL,
  status          TEXT NOT NULL,          -- QUEUED | SENT | SUCCEEDED | PARTIALLY_FAILED | FAILED | DROPPED
  revert_reason   TEXT,
  gas_limit       BIGINT NOT NULL,
  gas_estimated   BIGINT NOT NULL,
  sponsored       BOOLEAN NOT NULL DEFAULT false,
  sponsor_id      BIGINT,
  fee_token       TEXT,                   -- lower-case address, 'native', or NULL (sponsored / gasless)
  fee_value       NUMERIC(78, 0),
  sender          TEXT,
  txn_nonce       BIGINT,
  txn_hash        TEXT,                   -- the hash that was mined (or the latest broadcast)
  block_number    BIGINT,
  gas_used        BIGINT,
  gas_price       NUMERIC(78, 0),
  receipt         TEXT,                   -- the node's eth_getTransactionReceipt JSON, verbatim
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  queued_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  sent_at         TIMESTAMPTZ,
  mined_at        TIMESTAMPTZ,
  updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, id)
);
CREATE INDEX meta_txns_queue_idx ON meta_txns (chain_id, next_attempt_at) WHERE status = 'QUEUED';
CREATE INDEX meta_txns_sent_idx ON meta_txns (chain_id) WHERE status = 'SENT';
CREATE INDEX meta_txns_project_idx ON meta_txns (project_id, queued_at DESC);

-- Each wallet bundle inside a meta-transaction: findable by its own subdigest, and what nonce it uses.
CREATE TABLE meta_txn_bundles (
  chain_id     BIGINT NOT NULL,
  bundle_id    TEXT NOT NULL,             -- the wallet bundle's subdigest, no 0x
  meta_txn_id  TEXT NOT NULL,
  wallet       TEXT NOT NULL,
  nonce_space  NUMERIC(78, 0) NOT NULL,
  nonce        NUMERIC(78, 0) NOT NULL,
  PRIMARY KEY (chain_id, bundle_id),
  FOREIGN KEY (chain_id, meta_txn_id) REFERENCES meta_txns (chain_id, id)
);
CREATE INDEX meta_txn_bundles_nonce_idx ON meta_txn_bundles (chain_id, wallet, nonce_space, nonce);
CREATE INDEX meta_txn_bundles_meta_idx ON meta_txn_bundles (chain_id, meta_txn_id);

-- Every signed transaction, written before it is broadcast.
CREATE TABLE relay_txs (
  id               BIGSERIAL PRIMARY KEY,
  chain_id         BIGINT NOT NULL,
  sender           TEXT NOT NULL,
  nonce            BIGINT NOT NULL,
  meta_txn_id      TEXT,
  hash             TEXT NOT NULL,
  raw              TEXT NOT NULL,
  gas_limit        BIGINT NOT NULL,
  max_fee          NUMERIC(78, 0),
  max_priority_fee NUMERIC(78, 0),
  gas_price        NUMERIC(78, 0),
  status           TEXT NOT NULL DEFAULT 'PENDING',   -- PENDING | MINED | REPLACED | FAILED
  error            TEXT,
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  broadcast_at     TIMESTAMPTZ,
  mined_block      BIGINT
);
CREATE UNIQUE INDEX relay_txs_hash_idx ON relay_txs (chain_id, hash);
CREATE INDEX relay_txs_sender_idx ON relay_txs (chain_id, sender, nonce);
CREATE INDEX relay_txs_pending_idx ON relay_txs (chain_id) WHERE status = 'PENDING';

-- The nonce ledger and ownership of each sender: one process signs for a sender at a time.
CREATE TABLE relay_senders (
  chain_id     BIGINT NOT NULL,
  address      TEXT NOT NULL,
  next_nonce   BIGINT,
  owner        TEXT,
  lease_until  TIMESTAMPTZ,
  updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, address)
);

-- Project balances (Sequence's gas tanks): what a project holds per network, in wei, to pay for the
-- meta-transactions it sponsors. docs/project-balances.md describes the ledger.
CREATE TABLE gas_tanks (
  id                 BIGSERIAL PRIMARY KEY,
  chain_id           BIGINT NOT NULL,
  project_id         BIGINT REFERENCES projects(id),   -- the project it pays for (NULL: not attached yet)
  name               TEXT NOT NULL DEFAULT '',
  unlimited          BOOLEAN NOT NULL DEFAULT false,   -- true: debited, never stops sponsorship
  fee_markup_factor  TEXT NOT NULL DEFAULT '1',        -- a debit is the gas cost times this (exact decimal)
  balance_wei        NUMERIC(78, 0) NOT NULL DEFAULT 0,
  created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX gas_tanks_project_idx ON gas_tanks (project_id, chain_id) WHERE project_id IS NOT NULL;

-- Every change of a balance, appended and never rewritten: operators' adjustments, debits of mined
-- sponsored meta-transactions, and reversals of debits a reorg undid. balance_wei is the tank's
-- balance after the entry (NULL when the project had no tank: its spend is still recorded).
CREATE TABLE gas_tank_ledger (
  id           BIGSERIAL PRIMARY KEY,
  chain_id     BIGINT NOT NULL,
  project_id   BIGINT,
  tank_id      BIGINT REFERENCES gas_tanks(id),
  kind         TEXT NOT NULL CHECK (kind IN ('adjustment', 'debit', 'reversal')),
  amount_wei   NUMERIC(78, 0) NOT NULL,                -- signed: credits > 0, debits < 0
  balance_wei  NUMERIC(78, 0),
  nonce        BIGINT,                                 -- adjustments: 0, 1, 2 … per tank
  identifier   TEXT,                                   -- AdjustProjectBalance's idempotency key
  meta_txn_id  TEXT,                                   -- debits and reversals
  txn_hash     TEXT,
  gas_used     BIGINT,                                 -- the meta-transaction's share of its transaction's gas
  gas_price    NUMERIC(78, 0),                         -- the receipt's effectiveGasPrice
  cost_wei     NUMERIC(78, 0),                         -- gas_used × gas_price, before the tank's markup
  reverses     BIGINT,                                 -- a reversal: the debit it undoes
  usd_rate     TEXT,                                   -- native/USD when written (NULL: no feed)
  created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX gas_tank_ledger_nonce_idx ON gas_tank_ledger (tank_id, nonce) WHERE nonce IS NOT NULL;
CREATE UNIQUE INDEX gas_tank_ledger_identifier_idx ON gas_tank_ledger (tank_id, identifier) WHERE identifier IS NOT NULL;
CREATE INDEX gas_tank_ledger_meta_idx ON gas_tank_ledger (chain_id, meta_txn_id) WHERE meta_txn_id IS NOT NULL;
CREATE INDEX gas_tank_ledger_project_idx ON gas_tank_ledger (project_id, chain_id, created_at);
CREATE INDEX gas_tank_ledger_tank_idx ON gas_tank_ledger (tank_id, id);

-- What intake set aside for a sponsored meta-transaction until it is mined (then debited) or dropped.
-- A hold counts only while its meta-transaction is live (or for a moment while intake writes it), so a
-- process that died between holding and queueing leaks nothing.
CREATE TABLE gas_tank_holds (
  id           BIGSERIAL PRIMARY KEY,
  tank_id      BIGINT NOT NULL REFERENCES gas_tanks(id),
  chain_id     BIGINT NOT NULL,
  meta_txn_id  TEXT NOT NULL,
  amount_wei   NUMERIC(78, 0) NOT NULL,
  created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX gas_tank_holds_tank_idx ON gas_tank_holds (tank_id);
CREATE INDEX gas_tank_holds_meta_idx ON gas_tank_holds (chain_id, meta_txn_id);

-- Sender refills: a treasury key per chain tops a sender up to a target when it falls below
-- minSenderBalance (the utility-wallet refill). One row per transfer, shown in RuntimeStatus.
CREATE TABLE sender_refills (
  id           BIGSERIAL PRIMARY KEY,
  chain_id     BIGINT NOT NULL,
  sender       TEXT NOT NULL,
  treasury     TEXT NOT NULL,
  amount_wei   NUMERIC(78, 0) NOT NULL,
  hash         TEXT NOT NULL,
  status       TEXT NOT NULL DEFAULT 'PENDING',      -- PENDING | MINED | FAILED
  error        TEXT,
  block_number BIGINT,
  created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX sender_refills_chain_idx ON sender_refills (chain_id, created_at DESC);
CREATE INDEX sender_refills_pending_idx ON sender_refills (chain_id, sender) WHERE status = 'PENDING';

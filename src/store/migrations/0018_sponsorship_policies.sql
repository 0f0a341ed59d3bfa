-- Sponsorship policies (docs/sponsorship.md): per rule, caps in wei and/or USD (USD amounts are kept in
-- atto-USD, 10^-18 dollars, so one integer type holds both), a validity window and wallet allow/deny lists.
ALTER TABLE gas_sponsors ADD COLUMN daily_cap_usd NUMERIC(78, 0);
ALTER TABLE gas_sponsors ADD COLUMN wallet_daily_cap_wei NUMERIC(78, 0);
ALTER TABLE gas_sponsors ADD COLUMN wallet_daily_cap_usd NUMERIC(78, 0);
ALTER TABLE gas_sponsors ADD COLUMN txn_cap_wei NUMERIC(78, 0);
ALTER TABLE gas_sponsors ADD COLUMN txn_cap_usd NUMERIC(78, 0);
ALTER TABLE gas_sponsors ADD COLUMN total_budget_wei NUMERIC(78, 0);
ALTER TABLE gas_sponsors ADD COLUMN total_budget_usd NUMERIC(78, 0);
ALTER TABLE gas_sponsors ADD COLUMN valid_from TIMESTAMPTZ;
ALTER TABLE gas_sponsors ADD COLUMN valid_until TIMESTAMPTZ;
-- NULL: any wallet; otherwise only these (lower-case addresses).
ALTER TABLE gas_sponsors ADD COLUMN allow_wallets TEXT[];
ALTER TABLE gas_sponsors ADD COLUMN deny_wallets TEXT[] NOT NULL DEFAULT '{}';
-- What the rule has spent in all (the total budget's counter), beside sponsor_spend's per-day one.
ALTER TABLE gas_sponsors ADD COLUMN spent_wei NUMERIC(78, 0) NOT NULL DEFAULT 0;
ALTER TABLE gas_sponsors ADD COLUMN spent_usd NUMERIC(78, 0) NOT NULL DEFAULT 0;
ALTER TABLE sponsor_spend ADD COLUMN spent_usd NUMERIC(78, 0) NOT NULL DEFAULT 0;

-- Per rule, wallet and UTC day: the per-wallet daily cap's counter.
CREATE TABLE sponsor_wallet_spend (
  sponsor_id  BIGINT NOT NULL,
  wallet      TEXT NOT NULL,
  day         DATE NOT NULL,
  spent_wei   NUMERIC(78, 0) NOT NULL DEFAULT 0,
  spent_usd   NUMERIC(78, 0) NOT NULL DEFAULT 0,
  PRIMARY KEY (sponsor_id, wallet, day)
);

-- Every charge, written in the transaction that queues its meta-transaction, so a refund (the
-- meta-transaction DROPPED) gives back exactly what was taken, to the day it was taken from.
CREATE TABLE sponsor_charges (
  id           BIGSERIAL PRIMARY KEY,
  chain_id     BIGINT NOT NULL,
  meta_txn_id  TEXT NOT NULL,
  sponsor_id   BIGINT NOT NULL,
  wallets      TEXT[] NOT NULL,
  day          DATE NOT NULL,
  wei          NUMERIC(78, 0) NOT NULL,
  usd          NUMERIC(78, 0) NOT NULL,
  charged_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  refunded_at  TIMESTAMPTZ
);
CREATE INDEX sponsor_charges_meta_idx ON sponsor_charges (chain_id, meta_txn_id);
CREATE INDEX sponsor_charges_sponsor_idx ON sponsor_charges (sponsor_id, id);

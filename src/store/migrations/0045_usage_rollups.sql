-- The project overview's counts, kept rolled up per UTC hour so a chart reads a few hundred rows
-- instead of counting raw rows on every view (docs/console.md).

-- Requests per access key, hour and method family: added by the usage flush, in the statement that
-- already adds to access_keys.request_count (store/access-keys.ts recordUsage).
CREATE TABLE key_usage_hourly (
  key_id   BIGINT NOT NULL REFERENCES access_keys(id),
  hour     TIMESTAMPTZ NOT NULL,
  family   TEXT NOT NULL CHECK (family IN ('metadata', 'relayer', 'indexer', 'other')),
  requests BIGINT NOT NULL,
  PRIMARY KEY (key_id, hour, family)
);
-- Counts from before this table have no family or hour: they land in 'other' at the key's last use,
-- so a key's hours add up to its request_count from the start.
INSERT INTO key_usage_hourly (key_id, hour, family, requests)
SELECT id, to_timestamp(floor(extract(epoch FROM COALESCE(last_used_at, created_at)) / 3600) * 3600), 'other', request_count
  FROM access_keys WHERE request_count > 0;

-- Meta-transactions per project, network, hour queued and current status, with their gas, cost
-- (gas_used * gas_price, what the sender paid) and fees received. Kept by a roll-up pass over the rows
-- changed since its watermark (relayer/usage.ts), so the relayer's own statements stay as they were.
CREATE TABLE meta_txn_usage_hourly (
  project_id BIGINT NOT NULL,
  chain_id   BIGINT NOT NULL,
  hour       TIMESTAMPTZ NOT NULL,
  status     TEXT NOT NULL,
  txns       BIGINT NOT NULL,
  sponsored  BIGINT NOT NULL,
  gas_used   NUMERIC(78, 0) NOT NULL,
  cost_wei   NUMERIC(78, 0) NOT NULL,
  fee_wei    NUMERIC(78, 0) NOT NULL,
  PRIMARY KEY (project_id, chain_id, hour, status)
);
CREATE TABLE usage_rollup_marks (
  name      TEXT PRIMARY KEY,
  watermark TIMESTAMPTZ NOT NULL
);
INSERT INTO usage_rollup_marks (name, watermark) VALUES ('meta_txns', to_timestamp(0));
-- The roll-up finds what changed by updated_at, which every status write of relayer/store.ts sets.
CREATE INDEX meta_txns_updated_idx ON meta_txns (updated_at);

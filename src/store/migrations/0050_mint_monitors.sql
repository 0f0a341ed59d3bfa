-- Mint monitors (the legacy AddContractToMintMonitor): a project's request that the chain watcher
-- follow a contract's mints even before the service has met the contract. One row per project and
-- contract, so one project's RemoveContractFromMintMonitor never ends another's; the watcher follows
-- the union. Written only by src/metadata/refresh/mint-monitors.ts.
CREATE TABLE mint_monitors (
  project_id       BIGINT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  chain_id         BIGINT NOT NULL,
  contract_address TEXT NOT NULL,                               -- lower-case 0x address
  last_task_id     BIGINT REFERENCES tasks(id) ON DELETE SET NULL, -- the latest MintMonitorTriggerJob's task
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, chain_id, contract_address)
);
-- The watcher reads a chain's monitored contracts on every poll.
CREATE INDEX mint_monitors_chain_idx ON mint_monitors (chain_id, contract_address);

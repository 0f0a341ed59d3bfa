-- Refresh tasks and their items. Nothing lives only in memory: workers claim items with
-- FOR UPDATE SKIP LOCKED and hold them under a lease, so a dead worker's items are taken over.
CREATE TABLE tasks (
  id               BIGSERIAL PRIMARY KEY,
  project_id       BIGINT REFERENCES projects(id),   -- NULL: enqueued by the chain watcher
  kind             TEXT NOT NULL,                     -- tokens | contracts
  chain_id         BIGINT NOT NULL,
  contract_address TEXT,                              -- tokens tasks: the contract
  status           TEXT NOT NULL DEFAULT 'QUEUED',    -- QUEUED | PAUSED | FAILED | DONE
  cancelled        BOOLEAN NOT NULL DEFAULT false,
  priority         INTEGER NOT NULL DEFAULT 0,        -- lower runs first
  refresh_all      BOOLEAN NOT NULL DEFAULT false,
  only_new         BOOLEAN NOT NULL DEFAULT false,    -- refreshAll of tokens never seen (newMints)
  enumerated       BOOLEAN NOT NULL DEFAULT true,     -- false until a refreshAll has listed its tokens
  source           TEXT NOT NULL DEFAULT 'api',       -- api | watcher | cli
  total            INTEGER NOT NULL DEFAULT 0,
  succeeded        INTEGER NOT NULL DEFAULT 0,
  failed           INTEGER NOT NULL DEFAULT 0,
  tries            INTEGER NOT NULL DEFAULT 0,
  last_error       TEXT,
  lease_owner      TEXT,
  lease_until      TIMESTAMPTZ,
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  last_ran_at      TIMESTAMPTZ,
  finished_at      TIMESTAMPTZ
);
CREATE INDEX tasks_enumerate_idx ON tasks (priority, id) WHERE NOT enumerated AND status = 'QUEUED';
CREATE INDEX tasks_project_idx ON tasks (project_id, id);

CREATE TABLE task_items (
  task_id          BIGINT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  item             TEXT NOT NULL,                     -- token id (decimal) or contract address
  chain_id         BIGINT NOT NULL,
  contract_address TEXT NOT NULL,
  status           TEXT NOT NULL DEFAULT 'QUEUED',    -- QUEUED | DONE | FAILED | CANCELLED
  priority         INTEGER NOT NULL DEFAULT 0,
  attempts         INTEGER NOT NULL DEFAULT 0,
  next_attempt_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  lease_owner      TEXT,
  lease_until      TIMESTAMPTZ,
  failure_reason   TEXT,
  updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, item)
);
CREATE INDEX task_items_claim_idx ON task_items (priority, next_attempt_at, task_id) WHERE status = 'QUEUED';
CREATE INDEX task_items_target_idx ON task_items (chain_id, contract_address, item, status);

-- The chain watcher's position per chain, with the hash to notice reorgs.
CREATE TABLE chain_cursors (
  chain_id     BIGINT PRIMARY KEY,
  block_number BIGINT NOT NULL,
  block_hash   TEXT NOT NULL,
  updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

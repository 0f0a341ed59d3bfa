-- Push (issue 15): an outbox of events written in the same transaction as the state change that
-- causes them, the webhook endpoints projects register, and one delivery row per (endpoint, event).

-- The outbox. `seq` is given after commit, in commit order, by one sequencer at a time (events/outbox.ts):
-- BIGSERIAL ids are handed out at insert, so a reader following ids could pass over a row whose
-- transaction commits late; a reader following `seq` (the SSE stream, Last-Event-ID) cannot.
CREATE SEQUENCE events_seq;
CREATE TABLE events (
  id          BIGSERIAL PRIMARY KEY,
  seq         BIGINT UNIQUE,
  type        TEXT NOT NULL,
  chain_id    BIGINT,
  project_id  BIGINT,                 -- NULL: an event of the deployment (tokens, senders), seen by every project
  subject     TEXT,                   -- what the event is about (a meta-transaction id…): deliveries of one subject keep their order
  payload     JSONB NOT NULL,
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX events_unsequenced_idx ON events (id) WHERE seq IS NULL;

CREATE TABLE webhooks (
  id               BIGSERIAL PRIMARY KEY,
  project_id       BIGINT NOT NULL REFERENCES projects(id),
  url              TEXT NOT NULL,
  events           TEXT[] NOT NULL,   -- event types, or '*'
  chain_ids        BIGINT[],          -- NULL: every chain
  description      TEXT NOT NULL DEFAULT '',
  enabled          BOOLEAN NOT NULL DEFAULT true,
  -- The HMAC key itself (it must sign); shown once, at creation, never listed.
  secret           TEXT NOT NULL,
  disabled_reason  TEXT,
  failing_since    TIMESTAMPTZ,       -- first failure since the last success
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  deleted_at       TIMESTAMPTZ
);
CREATE INDEX webhooks_project_idx ON webhooks (project_id) WHERE deleted_at IS NULL;

CREATE TABLE webhook_deliveries (
  id               BIGSERIAL PRIMARY KEY,
  webhook_id       BIGINT NOT NULL REFERENCES webhooks(id),
  event_id         BIGINT NOT NULL REFERENCES events(id) ON DELETE CASCADE,
  subject          TEXT,
  status           TEXT NOT NULL DEFAULT 'PENDING',   -- PENDING | DELIVERED | DEAD
  attempts         INTEGER NOT NULL DEFAULT 0,
  next_attempt_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  claimed_by       TEXT,
  claimed_until    TIMESTAMPTZ,
  last_status      INTEGER,
  last_error       TEXT,
  last_latency_ms  INTEGER,
  response_snippet TEXT,
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  delivered_at     TIMESTAMPTZ
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at, id) WHERE status = 'PENDING';
CREATE INDEX webhook_deliveries_subject_idx ON webhook_deliveries (webhook_id, subject, id) WHERE status = 'PENDING';
CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, id DESC);

-- The sponsorship approval webhook (GasSponsor.webhookUrl / webhookAuthToken): '' means none.
ALTER TABLE gas_sponsors ADD COLUMN webhook_url TEXT NOT NULL DEFAULT '';
ALTER TABLE gas_sponsors ADD COLUMN webhook_auth_token TEXT NOT NULL DEFAULT '';

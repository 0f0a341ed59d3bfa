-- The project console: operators' tokens and sessions, per-key rate limits, sponsorship spend caps.

-- Admin tokens made by `metarelay admin create`; only the SHA-256 digest is kept.
CREATE TABLE admin_tokens (
  id          BIGSERIAL PRIMARY KEY,
  token_hash  TEXT NOT NULL UNIQUE,
  label       TEXT NOT NULL DEFAULT '',
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  revoked_at  TIMESTAMPTZ
);

-- Console sign-ins. The cookie holds the secret; the row holds its digest. Expired rows are kept a
-- while so an expired cookie can be told apart from a made-up one (SessionExpired vs Unauthorized).
CREATE TABLE console_sessions (
  id_hash     TEXT PRIMARY KEY,
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  expires_at  TIMESTAMPTZ NOT NULL,
  ended_at    TIMESTAMPTZ
);
CREATE INDEX console_sessions_expiry_idx ON console_sessions (expires_at);

-- Networks a project's keys may use (NULL: all).
ALTER TABLE projects ADD COLUMN allowed_chain_ids BIGINT[];

-- A key's own token bucket (NULL: the config default, auth.rateLimit).
ALTER TABLE access_keys ADD COLUMN rate_per_sec DOUBLE PRECISION;
ALTER TABLE access_keys ADD COLUMN rate_burst INTEGER;

-- One bucket per key, shared by every process on the database.
CREATE TABLE rate_buckets (
  key_id      BIGINT PRIMARY KEY,
  tokens      DOUBLE PRECISION NOT NULL,
  updated_at  TIMESTAMPTZ NOT NULL
);

-- A sponsorship rule's daily budget in wei (NULL: no cap), and what it has spent per UTC day.
ALTER TABLE gas_sponsors ADD COLUMN daily_cap_wei NUMERIC(78, 0);
CREATE TABLE sponsor_spend (
  sponsor_id  BIGINT NOT NULL,
  day         DATE NOT NULL,
  spent_wei   NUMERIC(78, 0) NOT NULL DEFAULT 0,
  PRIMARY KEY (sponsor_id, day)
);

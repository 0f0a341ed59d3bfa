CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE projects (
  id          BIGSERIAL PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  archived_at TIMESTAMPTZ
);

-- Keys are stored as a SHA-256 digest; the plaintext is shown once, at creation.
CREATE TABLE access_keys (
  id            BIGSERIAL PRIMARY KEY,
  project_id    BIGINT NOT NULL REFERENCES projects(id),
  key_hash      TEXT NOT NULL UNIQUE,
  key_prefix    TEXT NOT NULL,
  label         TEXT NOT NULL DEFAULT '',
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  revoked_at    TIMESTAMPTZ,
  last_used_at  TIMESTAMPTZ,
  request_count BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX access_keys_project_idx ON access_keys(project_id);

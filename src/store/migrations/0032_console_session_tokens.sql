-- A console session remembers (as a digest) the admin token it signed in with, so it ends when that
-- token is revoked or leaves the config, and "sign out everywhere" can end every session of a token.
-- Sessions from before this migration know no token: they end (the operator signs in again).
ALTER TABLE console_sessions ADD COLUMN token_hash TEXT;
CREATE INDEX console_sessions_token_idx ON console_sessions (token_hash) WHERE ended_at IS NULL;

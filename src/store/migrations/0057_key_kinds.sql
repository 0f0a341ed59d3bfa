-- Keys come in two kinds, as in Sequence's model (docs/console.md "Key kinds"): a publishable key ships in
-- apps and may read, relay and stream; a secret key may also write the project's state (collections,
-- uploads, contract links, webhook listeners) and is refused when sent from a browser. Every key made
-- before this migration was the only kind there was and shipped in apps: it becomes publishable, and a
-- backend that wrote with it moves to a secret key.
ALTER TABLE access_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'publishable' CHECK (kind IN ('publishable', 'secret'));
-- A publishable key's allowed origins (scheme://host[:port]); NULL: any. A request with an Origin header
-- outside the list is refused (InvalidOrigin).
ALTER TABLE access_keys ADD COLUMN allowed_origins TEXT[];

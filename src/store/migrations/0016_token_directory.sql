-- The token directory: the curated contracts of each network. Token lists and admins add entries;
-- an admin's removal is kept (removed = true) so the next import of a list does not bring it back.
CREATE TABLE token_directory (
  chain_id      BIGINT NOT NULL,
  address       TEXT NOT NULL,
  source        TEXT NOT NULL,                 -- admin | list
  feature_index INTEGER NOT NULL DEFAULT 0,    -- > 0: featured, listed first, lowest first
  removed       BOOLEAN NOT NULL DEFAULT false,
  added_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, address)
);
CREATE INDEX token_directory_list_idx ON token_directory (chain_id, feature_index) WHERE NOT removed;
CREATE INDEX contracts_updated_idx ON contracts (updated_at);

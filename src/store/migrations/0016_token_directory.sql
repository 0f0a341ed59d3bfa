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

-- Token search answers in token order (length, then text, is numeric order for canonical decimals):
-- this index lets a filter on a common trait walk tokens in order and stop at the page's end
-- instead of collecting and sorting every match.
CREATE INDEX token_metadata_order_idx ON token_metadata (chain_id, contract_address, length(token_id), token_id) WHERE metadata IS NOT NULL;

-- Numeric trait ranges read token ids from the index alone (the search intersects id sets).
DROP INDEX token_properties_num_idx;
CREATE INDEX token_properties_num_idx ON token_properties (chain_id, contract_address, name_key, value_num) INCLUDE (token_id) WHERE value_num IS NOT NULL;

-- Token search speed (#14).
--
-- 1. Counts per (property, value) and per property, kept as tokens are (re)indexed, in the same
--    transaction (src/metadata/search/property-index.ts). GetTokenMetadataPropertyFilters reads them
--    instead of aggregating every token_properties row of the contract (seconds on 100 000 tokens),
--    and a search reads them to pick its plan (walk the tokens in order, or start from the rarest
--    property's ids).
--
--    token_property_values: one row per spelling of a (name, value) pair and its kind, with how many
--    tokens have it. The spelling is kept so the answer shows the same name and value as before
--    (min over spellings); has_num says the value is also a number (value_key::numeric then).
CREATE TABLE token_property_values (
  chain_id         BIGINT NOT NULL,
  contract_address TEXT NOT NULL,
  name_key         TEXT NOT NULL,
  value_key        TEXT NOT NULL,
  name             TEXT NOT NULL,
  value_text       TEXT NOT NULL,
  kind             TEXT NOT NULL,
  has_num          BOOLEAN NOT NULL,
  tokens           INTEGER NOT NULL,
  PRIMARY KEY (chain_id, contract_address, name_key, value_key, name, value_text, kind, has_num)
);

--    token_property_names: how many tokens have the property (a token with an array value has
--    several pairs of one name, so this is not a sum of the value counts).
CREATE TABLE token_property_names (
  chain_id         BIGINT NOT NULL,
  contract_address TEXT NOT NULL,
  name_key         TEXT NOT NULL,
  tokens           INTEGER NOT NULL,
  PRIMARY KEY (chain_id, contract_address, name_key)
);

INSERT INTO token_property_values (chain_id, contract_address, name_key, value_key, name, value_text, kind, has_num, tokens)
SELECT chain_id, contract_address, name_key, value_key, name, value_text, kind, value_num IS NOT NULL, count(*)
  FROM token_properties
 GROUP BY chain_id, contract_address, name_key, value_key, name, value_text, kind, value_num IS NOT NULL;

INSERT INTO token_property_names (chain_id, contract_address, name_key, tokens)
SELECT chain_id, contract_address, name_key, count(DISTINCT token_id)
  FROM token_properties
 GROUP BY chain_id, contract_address, name_key;

-- 2. A search tests each token it walks against the other properties of the filter: one descent
--    of this index finds the token's pairs (about as many as it has traits) and answers from the
--    index alone. It also serves the delete of a token's pairs on re-index, so it replaces the
--    (chain, contract, token) index.
CREATE INDEX token_properties_probe_idx ON token_properties (chain_id, contract_address, token_id, name_key) INCLUDE (value_key, value_num);
DROP INDEX token_properties_token_idx;

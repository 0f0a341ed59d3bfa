-- Contract info. Each source keeps its own layer; the served columns are merged from them
-- (override > token list > chain > contractURI document; chain wins for decimals and type).
ALTER TABLE contracts
  ADD COLUMN name            TEXT NOT NULL DEFAULT '',
  ADD COLUMN symbol          TEXT NOT NULL DEFAULT '',
  ADD COLUMN decimals        INTEGER,
  ADD COLUMN logo_uri        TEXT NOT NULL DEFAULT '',
  ADD COLUMN extensions      JSONB NOT NULL DEFAULT '{}',
  ADD COLUMN source          TEXT NOT NULL DEFAULT 'UNKNOWN',
  ADD COLUMN deployed        BOOLEAN NOT NULL DEFAULT false,
  ADD COLUMN bytecode_hash   TEXT NOT NULL DEFAULT '0x',
  ADD COLUMN chain_layer     JSONB,
  ADD COLUMN uri_layer       JSONB,
  ADD COLUMN list_layer      JSONB,
  ADD COLUMN override_layer  JSONB,
  ADD COLUMN info_fetched_at TIMESTAMPTZ,
  ADD COLUMN info_failure    TEXT,
  -- Curated (token list, override, verified/featured) contracts rank before unknown ones in search.
  ADD COLUMN curated         BOOLEAN NOT NULL DEFAULT false,
  ADD COLUMN search          tsvector GENERATED ALWAYS AS (to_tsvector('simple', name || ' ' || symbol)) STORED;

CREATE INDEX contracts_search_idx ON contracts USING gin (search);
CREATE INDEX contracts_name_trgm_idx ON contracts USING gin (lower(name) gin_trgm_ops);
CREATE INDEX contracts_symbol_trgm_idx ON contracts USING gin (lower(symbol) gin_trgm_ops);
CREATE INDEX contracts_symbol_idx ON contracts (lower(symbol));
-- Prefix search for queries too short for trigrams.
CREATE INDEX contracts_name_prefix_idx ON contracts (lower(name) text_pattern_ops);
CREATE INDEX contracts_address_idx ON contracts (address);

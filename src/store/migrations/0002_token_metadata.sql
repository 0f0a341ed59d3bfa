-- What the service knows about a contract; later migrations add contract-info columns.
CREATE TABLE contracts (
  chain_id        BIGINT NOT NULL,
  address         TEXT NOT NULL,            -- lower-case 0x hex
  type            TEXT NOT NULL DEFAULT 'UNKNOWN',
  type_checked_at TIMESTAMPTZ,
  -- Which ERC1155 {id} spelling the origin answers (0 = 64-hex per spec); NULL until learned.
  id_variant      SMALLINT,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, address)
);

-- One row per token ever resolved. `metadata`/`raw` hold the last good document only:
-- a failed fetch records its reason but never replaces them.
CREATE TABLE token_metadata (
  chain_id         BIGINT NOT NULL,
  contract_address TEXT NOT NULL,
  token_id         TEXT NOT NULL,           -- decimal
  source           TEXT NOT NULL DEFAULT 'FETCHER_ON_CHAIN_TOKEN_URI',
  token_uri        TEXT,
  metadata         JSONB,
  raw              JSONB,
  failure_reason   TEXT,
  failure_message  TEXT,
  retry_after      TIMESTAMPTZ,
  trace            JSONB,
  fetch_count      INTEGER NOT NULL DEFAULT 0,
  last_fetched     TIMESTAMPTZ,
  last_attempt     TIMESTAMPTZ,
  updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, contract_address, token_id)
);
CREATE INDEX token_metadata_updated_idx ON token_metadata (updated_at);

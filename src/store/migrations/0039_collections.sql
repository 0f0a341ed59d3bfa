-- Collections (issue #35): a project's token metadata and media hosted here, served where a
-- contract's tokenURI points. A collection is private (unpublished) until PublishCollection.

CREATE TABLE collections (
  id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id  BIGINT NOT NULL REFERENCES projects (id),
  -- Sequence's CollectionMetadata: name, description, image, external_link, properties, attributes.
  metadata    JSONB NOT NULL,
  private     BOOLEAN NOT NULL DEFAULT true,
  reveal_key  TEXT,
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX collections_project_idx ON collections (project_id, id);

-- One row per token of a collection; token_id is the canonical decimal string.
CREATE TABLE collection_tokens (
  collection_id BIGINT NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
  token_id      TEXT NOT NULL,
  metadata      JSONB NOT NULL,
  private       BOOLEAN NOT NULL DEFAULT false,
  updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (collection_id, token_id)
);

-- An asset is declared first (CreateAsset: which field of which token), then its bytes uploaded.
-- The bytes are a media blob (content-addressed, stored once); a blob an asset points at is never
-- collected (media-store.ts looks here as well as at media_assets). token_id '' is the collection's own.
CREATE TABLE collection_assets (
  id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  collection_id  BIGINT NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
  token_id       TEXT NOT NULL DEFAULT '',
  metadata_field TEXT NOT NULL,
  filename       TEXT,
  sha256         TEXT REFERENCES media_blobs (sha256),
  updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
  UNIQUE (collection_id, token_id, metadata_field)
);
CREATE INDEX collection_assets_sha256_idx ON collection_assets (sha256);

-- A deployed contract whose metadata is a collection's (one collection per contract and chain).
CREATE TABLE contract_collections (
  id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id       BIGINT NOT NULL REFERENCES projects (id),
  chain_id         BIGINT NOT NULL,
  contract_address TEXT NOT NULL,
  collection_id    BIGINT NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
  UNIQUE (chain_id, contract_address)
);
CREATE INDEX contract_collections_collection_idx ON contract_collections (collection_id);

-- Media pipeline (issue #16): originals stored once, content-addressed by SHA-256, in the blob
-- store (a folder or S3); these tables say what each blob is and which token field points at it.

-- One row per distinct original. Renditions are derived (generated on first request and cached
-- in the blob store under the same hash), so they need no row.
CREATE TABLE media_blobs (
  sha256 text PRIMARY KEY,
  mime_type text NOT NULL,
  filesize bigint NOT NULL,
  width integer,
  height integer,
  frames integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- One row per media field of a token (image, image_data, animation_url). status READY points at a
-- blob; FAILED keeps the reason a client is told (404 with it), and when it may be tried again.
CREATE TABLE media_assets (
  -- The Asset.id of the Sequence shape.
  id bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  chain_id bigint NOT NULL,
  contract text NOT NULL,
  token_id text NOT NULL,
  field text NOT NULL,
  source_url text NOT NULL,
  status text NOT NULL CHECK (status IN ('READY', 'FAILED')),
  sha256 text REFERENCES media_blobs (sha256),
  failure_reason text,
  failure_message text,
  retry_after timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, contract, token_id, field),
  CHECK ((status = 'READY') = (sha256 IS NOT NULL))
);
CREATE INDEX media_assets_sha256 ON media_assets (sha256);

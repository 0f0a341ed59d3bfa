-- Ecosystems (Sequence's): a named group of projects. A gas sponsorship rule belongs either to one
-- project or to an ecosystem, whose rules sponsor the bundles of every project in it.
CREATE TABLE ecosystems (
  id          BIGSERIAL PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
ALTER TABLE projects ADD COLUMN ecosystem_id BIGINT REFERENCES ecosystems(id);
ALTER TABLE gas_sponsors ADD COLUMN ecosystem_id BIGINT REFERENCES ecosystems(id);
ALTER TABLE gas_sponsors ALTER COLUMN project_id DROP NOT NULL;
ALTER TABLE gas_sponsors ADD CONSTRAINT gas_sponsors_one_owner CHECK ((project_id IS NULL) <> (ecosystem_id IS NULL));
CREATE UNIQUE INDEX gas_sponsors_ecosystem_rule_idx ON gas_sponsors (ecosystem_id, chain_id, kind, address) WHERE deleted_at IS NULL AND ecosystem_id IS NOT NULL;

-- Token search from posting lists held in memory (#14; src/metadata/search/postings*.ts).
--
-- Each API process may keep, per contract, its tokens' (property, value) pairs as posting lists and
-- their lower-cased names and descriptions, and answers searches from them. What keeps every process
-- true to the database is a version per contract, bumped in the transaction that re-indexes tokens
-- (under the contract's counts lock, so versions commit in order), and the list of tokens each
-- version changed: a process that holds version v reads the tokens changed after v and re-reads
-- only those.
--
-- Versions come from one sequence, so a number is never given twice, even after a chain is
-- forgotten and its contracts indexed again. `floor` is the oldest version a process may still
-- hold and catch up from by the changes kept (older changes are pruned); a process holding less
-- reloads the contract.
CREATE SEQUENCE token_index_version_seq;

CREATE TABLE token_index_versions (
  chain_id         BIGINT NOT NULL,
  contract_address TEXT NOT NULL,
  version          BIGINT NOT NULL,
  floor            BIGINT NOT NULL,
  PRIMARY KEY (chain_id, contract_address)
);

CREATE TABLE token_index_changes (
  chain_id         BIGINT NOT NULL,
  contract_address TEXT NOT NULL,
  version          BIGINT NOT NULL,
  token_ids        TEXT[] NOT NULL,
  PRIMARY KEY (chain_id, contract_address, version)
);

-- Contracts indexed before this migration start at a version of their own, with no changes kept.
INSERT INTO token_index_versions (chain_id, contract_address, version, floor)
SELECT chain_id, contract_address, v, v
  FROM (SELECT chain_id, contract_address, nextval('token_index_version_seq') AS v
          FROM (SELECT DISTINCT chain_id, contract_address FROM token_metadata WHERE metadata IS NOT NULL) c) n;

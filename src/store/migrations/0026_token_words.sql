-- Typo-tolerant token search without rechecking the collection (#14).
--
-- A typo such as "creeture" is trigram-similar to nearly every name of a collection whose names share
-- a word ("Bench Creature #1", …), so the trigram indexes on whole names return the whole collection
-- and similarity was computed for every token (a second on 100 000 tokens). Instead a search looks up
-- the few words of the contract nearest to each word of the text (token_text_words: distinct words per
-- contract, a short list once numbers are left out), then walks the tokens having one of them in token
-- order (token_words), stopping when its page is full.

-- The words of a token's name and description: lower case, split on anything not a letter or digit,
-- three characters or more, with a letter (numbers like "#1234" are ids, not words to misspell),
-- at most 100 per token (a description may be long).
CREATE FUNCTION metarelay_token_words(doc jsonb)
RETURNS SETOF text
LANGUAGE sql IMMUTABLE AS $fn$
  SELECT w FROM (
    SELECT DISTINCT w
      FROM regexp_split_to_table(lower(coalesce(doc->>'name', '') || ' ' || coalesce(doc->>'description', '')), '[^[:alnum:]]+') AS w
     WHERE length(w) BETWEEN 3 AND 64 AND w ~ '[[:alpha:]]'
  ) AS d ORDER BY w LIMIT 100
$fn$;

-- Which tokens have which word; read in token order (ids are canonical decimals: length, then text).
CREATE TABLE token_words (
  chain_id         BIGINT NOT NULL,
  contract_address TEXT NOT NULL,
  word             TEXT NOT NULL,
  token_id         TEXT NOT NULL
);
CREATE UNIQUE INDEX token_words_order_idx ON token_words (chain_id, contract_address, word, length(token_id), token_id);
CREATE INDEX token_words_token_idx ON token_words (chain_id, contract_address, token_id);

-- The distinct words of a contract and how many tokens have each; found by trigram similarity.
CREATE TABLE token_text_words (
  chain_id         BIGINT NOT NULL,
  contract_address TEXT NOT NULL,
  word             TEXT NOT NULL,
  tokens           INTEGER NOT NULL,
  PRIMARY KEY (chain_id, contract_address, word)
);
CREATE INDEX token_text_words_trgm_idx ON token_text_words USING gin (word gin_trgm_ops);

INSERT INTO token_words (chain_id, contract_address, word, token_id)
SELECT t.chain_id, t.contract_address, w, t.token_id
  FROM token_metadata t CROSS JOIN LATERAL metarelay_token_words(t.metadata) AS w
 WHERE t.metadata IS NOT NULL;

INSERT INTO token_text_words (chain_id, contract_address, word, tokens)
SELECT chain_id, contract_address, word, count(*) FROM token_words GROUP BY 1, 2, 3;
